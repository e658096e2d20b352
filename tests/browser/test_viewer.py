"""trialbox view in a real headless Chromium (Debian's chromium and chromium-driver, driven by Selenium): open a
run, filter it, open a trial, follow a live run, compare two candidates, and a trial whose agent left HTML and
script everywhere it could. The server is the real one (uvicorn on a loopback port) over run folders written by
trialbox's own store. Screenshots of every page are kept in ``test-artifacts/viewer/`` (or
``$TRIALBOX_ARTIFACTS/viewer``)."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from orchestrator.store import Store
from orchestrator.viewer.app import make_app
from orchestrator.viewer.serve import bind, url_of

from ..viewer_run import HOSTILE, record_trial, write_run

ARTIFACTS = Path(os.environ.get("TRIALBOX_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts") / "viewer"
WAIT_S = 60.0  # generous: the suite runs on busy hosts too


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("the browser tests need Debian's chromium and chromium-driver (make setup installs them)",
                    pytrace=False)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium look for a driver online
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(WAIT_S)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


class Viewer:
    """The real server, on a free loopback port, in a thread of this process."""

    def __init__(self, runs: dict[str, Path], figures=None) -> None:
        import uvicorn

        kwargs = {"figures": figures} if figures else {}
        self.sock = bind("127.0.0.1", 0)
        self.url = url_of(self.sock).rstrip("/")
        self.server = uvicorn.Server(uvicorn.Config(make_app(runs, **kwargs), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "Viewer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


def figures(run, link):
    return f'<p id="figs">figures of {len(run.planned())} planned trials</p><a id="fig-link" href="{link("task-0000", "new")}">x</a>'


def wait(driver, check, what: str, timeout: float = WAIT_S):
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: check(d))
    except Exception as exc:
        shot(driver, "timeout-" + what.replace(" ", "-"))
        raise AssertionError(f"waited {timeout:.0f} s for {what}; the page: {driver.current_url}, "
                             f"script errors: {driver.execute_script('return (window.__viewer||{}).errors')}") from exc


def shot(driver, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def choose(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(css(driver, "#" + select_id)[0]).select_by_value(value)


def test_open_a_run_filter_it_and_open_a_trial(browser, tmp_path):
    run = write_run(tmp_path / "demo", tasks=6, replicates=3)
    with Viewer({"demo": run.root}, figures) as v:
        browser.get(v.url + "/")
        assert "demo" in css(browser, "#runs")[0].text
        css(browser, "#runs a")[0].click()
        wait(browser, lambda d: len(css(d, "#matrix a.cell")) == 36, "36 matrix cells")
        wait(browser, lambda d: css(d, "#figs"), "the figures")
        assert css(browser, "#p-done")[0].text == "36" and css(browser, "#p-planned")[0].text == "36"
        shot(browser, "run")
        # filter: rejected trials only, in the matrix and the table
        choose(browser, "f-outcome", "rejected")
        rows = css(browser, "#trials tbody tr")
        assert rows and all(r.find_elements("css selector", "td.outcome")[0].text == "rejected" for r in rows)
        assert all(c.get_attribute("data-outcome") == "rejected" for c in css(browser, "#matrix a.cell"))
        n = len(rows)
        assert css(browser, "#f-count")[0].text == f"{n} of 36 trials"
        # a failing criterion and a flag filter too
        choose(browser, "f-outcome", "")
        choose(browser, "f-flag", "tamper")
        flagged = css(browser, "#trials tbody tr")
        assert flagged and all("tamper" in r.text for r in flagged)
        choose(browser, "f-flag", "")
        # sort by cost, descending on a second click
        header = [th for th in css(browser, "#trials th") if th.get_attribute("data-key") == "cost"][0]
        header.click()
        header.click()
        costs = [float(r.find_elements("css selector", "td")[6].text.lstrip("$")) for r in css(browser, "#trials tbody tr")]
        assert costs == sorted(costs, reverse=True) and len(costs) == 36
        # open a trial from the matrix
        first = css(browser, '#matrix tr[data-task="task-0002"] a.cell')[0]
        first.click()
        wait(browser, lambda d: css(d, "#verdict"), "the trial page")
        assert "task-0002/base/0" in css(browser, "#trial-id")[0].text
        assert len(css(browser, "#criteria tr")) == 7  # a header and six criteria
        assert css(browser, "#events td.src.harness") and css(browser, "#events td.src.model_reported")
        assert css(browser, "#diff span.gi") and css(browser, "#diff span.gd")  # highlighted
        shot(browser, "trial")
        assert browser.execute_script("return (window.__viewer||{errors:[]}).errors") == []


def test_follow_a_live_run_without_reloading(browser, tmp_path):
    run = write_run(tmp_path / "live", tasks=3, replicates=2, finished=4)
    with Viewer({"live": run.root}, figures) as v:
        browser.get(v.url + "/runs/live")
        wait(browser, lambda d: len(css(d, "#matrix a.cell")) == 4, "the first 4 trials")
        browser.execute_script("window.__notReloaded = 42")
        assert css(browser, "#p-left")[0].text == "8"
        store = Store(run)
        rng = random.Random(3)
        try:
            ids = [(f"task-{t:04d}", c, r) for t in range(3) for c in ("base", "new") for r in range(2)][4:]
            for n, (task, cand, rep) in enumerate(ids[:4], start=4):
                record_trial(run, store, task, cand, rep, n, rng)
            wait(browser, lambda d: css(d, "#p-done")[0].text == "8", "the count to reach 8")
            wait(browser, lambda d: len(css(d, "#matrix a.cell")) == 8, "8 matrix cells")
            for n, (task, cand, rep) in enumerate(ids[4:], start=8):
                record_trial(run, store, task, cand, rep, n, rng)
        finally:
            store.close()
        wait(browser, lambda d: len(css(d, "#matrix a.cell")) == 12 and css(d, "#p-left")[0].text == "0",
             "all 12 trials")
        assert browser.execute_script("return window.__notReloaded") == 42
        assert browser.execute_script("return window.__viewer.polls") >= 2
        shot(browser, "live")


def test_compare_two_candidates_on_one_task(browser, tmp_path):
    run = write_run(tmp_path / "cmp", tasks=3, replicates=3)
    with Viewer({"cmp": run.root}, figures) as v:
        browser.get(v.url + "/runs/cmp")
        wait(browser, lambda d: css(d, "#fig-link"), "the figures' link")
        css(browser, "#fig-link")[0].click()  # the report's per-task cell links to the comparison
        wait(browser, lambda d: css(d, "#side-1"), "the comparison page")
        from selenium.webdriver.support.ui import Select

        assert "a=new" in browser.current_url  # the link's pair: new on the left
        # the other way round, chosen in the form: wait for the new page itself (a marker on the old one is gone),
        # never for a URL the old page already had (that raced the navigation once, on a busy host)
        browser.execute_script("window.__before = 1")
        Select(css(browser, "select[name=a]")[0]).select_by_value("base")
        Select(css(browser, "select[name=b]")[0]).select_by_value("new")
        css(browser, "form button")[0].click()
        wait(browser, lambda d: d.execute_script("return window.__before === undefined && document.readyState === "
                                                 "'complete'") and "a=base" in d.current_url, "the chosen pair")
        left, right = css(browser, "#side-1")[0], css(browser, "#side-2")[0]
        assert left.find_elements("css selector", "h2")[0].text == "base"
        assert right.find_elements("css selector", "h2")[0].text == "new"
        assert len(left.find_elements("css selector", "article")) == 3 == len(right.find_elements("css selector", "article"))
        for d in css(browser, "details"):
            browser.execute_script("arguments[0].open = true", d)
        assert css(browser, "#side-1 pre.diff span.gi") and css(browser, "#side-2 ol.timeline li")
        shot(browser, "compare")


def test_agent_html_and_script_are_shown_as_text(browser, tmp_path):
    run = write_run(tmp_path / "hostile", tasks=2, replicates=2, hostile_trial="task-0001/new/1")
    with Viewer({"hostile": run.root}, figures) as v:
        for url in ("/runs/hostile/trial?id=task-0001%2Fnew%2F1", "/runs/hostile/compare?task=task-0001&a=new&b=base",
                    "/runs/hostile", "/runs/hostile/raw?id=task-0001%2Fnew%2F1&attempt=1&name=diff.patch"):
            browser.get(v.url + url)
            wait(browser, lambda d: d.execute_script("return document.readyState") == "complete", "the page")
            time.sleep(0.5)
            assert browser.execute_script("return window.__pwned") is None, url
            assert not css(browser, "#forged") and not css(browser, "img"), url
        browser.get(v.url + "/runs/hostile/trial?id=task-0001%2Fnew%2F1")
        wait(browser, lambda d: css(d, "#summary"), "the trial page")
        summary = css(browser, "#summary")[0].text
        assert summary.startswith("<script>window.__pwned = 1</script>") and "\\u202eTPECCA" in summary
        assert HOSTILE[:30] in css(browser, "#diff")[0].text
        shot(browser, "hostile-trial")
