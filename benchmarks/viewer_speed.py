"""trialbox view on a run of 10,000 trials (1,000 tasks × 2 candidates × 5 replicates, written by trialbox's
store; every 100th trial with its event log, diff and grader log).

Measured against the real server (uvicorn on a loopback port), side by side with a baseline:

* **the run opens**: the page and the two JSON answers it needs before it draws (the rows, the progress),
  fetched over HTTP, against a bare ``sqlite3`` read of the same columns dumped to JSON (the floor: no server
  can answer with less work); and, when Debian's chromium and chromedriver are here, the time from navigation
  until the page has drawn its matrix and table in headless Chromium. Target: under 2 s.
* **a trial page**: over HTTP, against ``trialbox show`` of the same trial in-process. Target: under 200 ms.

The report's figures are computed in the background and fill their panel when ready: they are not part of
"opens" (the report over 10,000 trials is ``report_speed.py``'s).

    .venv/bin/python benchmarks/viewer_speed.py [PAIRS]
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from _common import alternate, median_interval, quantile  # noqa: E402  (puts the repository on the path)

from orchestrator.show import show_trial  # noqa: E402
from orchestrator.viewer.app import make_app  # noqa: E402
from orchestrator.viewer.serve import bind, url_of  # noqa: E402
from tests.viewer_run import write_run  # noqa: E402

TASKS, REPLICATES = 1000, 5
TRIAL = "task-0500/base/0"  # trial number 5000: one with files


def serve(root: Path):
    import uvicorn

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(make_app({"big": root}, figures=lambda r, link: ""), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return server, thread, url_of(sock).rstrip("/")


def bare_rows(db: Path) -> None:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT rowid, id, task, candidate, replicate, outcome, outcome_kind, reasons, stop_reason, "
                       "cost_usd, duration_s FROM trials").fetchall()
    failed = con.execute("SELECT trial_id, name FROM criteria WHERE passed = 0").fetchall()
    con.close()
    json.dumps([rows, failed])


def browser_open(url: str, loads: int) -> list[float] | None:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        print("  (no chromium/chromedriver here: the browser figure is not measured)")
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
    times = []
    try:
        for _ in range(loads + 1):
            driver.get(url)
            WebDriverWait(driver, 60, poll_frequency=0.05).until(
                lambda d: d.execute_script("return (window.__viewer || {}).drawnAt"))
            times.append(driver.execute_script("return window.__viewer.drawnAt") / 1000)
    finally:
        driver.quit()
    return times[1:]  # the first load warms the browser's cache of the script and style


def side_by_side(name: str, label_a: str, ta: list[float], label_b: str, tb: list[float]) -> None:
    med, lo, hi = median_interval([x / y for x, y in zip(ta, tb)])
    print(f"{name}: {len(ta)} pairs")
    for label, t in ((label_a, ta), (label_b, tb)):
        print(f"  {label:28s} median {statistics.median(t) * 1000:8.1f} ms   p95 {quantile(t, 0.95) * 1000:8.1f} ms")
    print(f"  ratio per pair: median {med:.2f}x (95% interval {lo:.2f}-{hi:.2f})")


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    with tempfile.TemporaryDirectory(prefix="trialbox-viewer-bench-") as tmp:
        t0 = time.perf_counter()
        paths = write_run(Path(tmp) / "big", tasks=TASKS, replicates=REPLICATES, files=100)
        print(f"run of {TASKS * 2 * REPLICATES} trials written in {time.perf_counter() - t0:.0f} s")
        server, thread, url = serve(paths.root)
        client = httpx.Client(base_url=url, timeout=60)
        size = [0]

        def open_run(_: int) -> None:
            page = client.get("/runs/big")
            rows = client.get("/api/runs/big/rows?after=0")
            prog = client.get("/api/runs/big/progress")
            assert page.status_code == rows.status_code == prog.status_code == 200
            size[0] = len(rows.content)

        def trial_page(_: int) -> None:
            assert client.get("/runs/big/trial", params={"id": TRIAL}).status_code == 200

        ok = True
        ta, tb = alternate(open_run, lambda _: bare_rows(paths.db), pairs)
        side_by_side("the run opens (HTTP: page, rows, progress)", "trialbox view", ta, "bare sqlite3 + json", tb)
        print(f"  rows answer: {size[0] / 1e6:.1f} MB; target under 2 s: median {statistics.median(ta):.2f} s "
              f"{'MET' if statistics.median(ta) < 2 else 'NOT MET'}")
        ok &= statistics.median(ta) < 2
        ta, tb = alternate(trial_page, lambda _: show_trial(paths, TRIAL), pairs)
        side_by_side("a trial page (HTTP)", "trialbox view", ta, "trialbox show (in-process)", tb)
        p95 = quantile(ta, 0.95)
        print(f"  target under 200 ms: median {statistics.median(ta) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms "
              f"{'MET' if statistics.median(ta) < 0.2 else 'NOT MET'}")
        ok &= statistics.median(ta) < 0.2
        drawn = browser_open(url + "/runs/big", loads=5)
        if drawn:
            print(f"the run opens in headless Chromium (navigation to matrix and table drawn), {len(drawn)} loads: "
                  f"median {statistics.median(drawn):.2f} s, max {max(drawn):.2f} s; target under 2 s "
                  f"{'MET' if statistics.median(drawn) < 2 else 'NOT MET'}")
            ok &= statistics.median(drawn) < 2
        client.close()
        server.should_exit = True
        thread.join(timeout=30)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
