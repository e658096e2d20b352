"""The HTML report, opened in headless Chromium (Debian's chromium): every plot renders, no script error."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from orchestrator.html import render

from ..unit.test_report import decide, manifest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic"]


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("the browser tests need Debian's chromium (make setup installs it)", pytrace=False)
    return path


@pytest.mark.parametrize("kind", ["finished", "provisional"])
def test_report_renders_every_plot_in_chromium(chromium, tmp_path, kind):
    report, _ = decide(tmp_path / "run", manifest(min_delta=0.1, max_cost_per_accepted_usd=1.0), p_base=0.3, p_new=0.9,
                       finished=None if kind == "finished" else 60)
    page = tmp_path / "report.html"
    page.write_text(render(report))
    assert "http://" not in page.read_text().replace("http://www.w3.org", "") and "https://" not in page.read_text()
    profile = tmp_path / "profile"
    dom = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert "<title>trialbox report: ok</title>" in dom.stdout, dom.stdout[:500] + dom.stderr[-2000:]
    assert dom.stdout.count('class="plot"') == 6
    shot = tmp_path / "report.png"
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--window-size=1200,1600", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 20_000  # a page with drawings, not a blank one
