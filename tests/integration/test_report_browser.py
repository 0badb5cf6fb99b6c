"""The report in a real browser: headless Chromium loads the file offline and we check the page.

Screenshots (overview and one run page) are kept under pytest's tmp_path for a person to look at.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from posttrainbench.host.results.report.render import render_report, write_report
from tests.report_fixtures import EVIL_AGENT, IDS, build_results

pytestmark = pytest.mark.slow  # four browser starts, ~20-30 s on two shared cores

# Appended to a *copy* of the report (the report itself has no script): after load, record
# which elements CSS shows, so --dump-dom can tell us what the user sees for a #fragment.
PROBE = """<script>
window.addEventListener("load", () => {
  const shown = (el) => el && getComputedStyle(el).display !== "none";
  const pages = [...document.querySelectorAll(".run-page")].filter(shown).map((el) => el.id);
  document.documentElement.setAttribute("data-probe",
    JSON.stringify({main: shown(document.querySelector("main")), pages: pages}));
});
</script>"""


def chromium() -> str:
    """The Chromium binary; a missing browser is a setup problem, so the test fails (never skips)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail(
            "chromium is not on PATH: run `bash scripts/setup_browser.sh` (installs Debian's chromium; `make test` does it)"
        )
    return found


def browse(url: str, *extra: str) -> str:
    """Run headless Chromium on *url* with *extra* flags; stdout (the DOM for --dump-dom)."""
    # A fresh profile per start: no state shared with a user's browser or another test.
    with tempfile.TemporaryDirectory(prefix="ptb-chromium-") as profile:
        proc = subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--window-size=1400,2000",
                *extra,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def probe(report: Path, fragment: str = "") -> dict:
    """What is visible when *report* is opened at #fragment: {"main": bool, "pages": [ids]}."""
    copy = report.with_name("probe.html")
    copy.write_text(
        report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    dom = browse(copy.as_uri() + fragment, "--dump-dom")
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, "the probe script did not run"
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("browser")
    built = build_results(root)
    out = write_report(
        render_report(built.board, built.records, built.results_dir), root / "report.html"
    )
    return out, built


def test_overview_in_chromium(report):
    out, built = report
    dom = browse(out.as_uri(), "--dump-dom")
    board = dom[dom.index('id="leaderboard"') : dom.index('id="cells"')]
    names = [html.unescape(n) for n in re.findall(r'<td class="agent" data-agent="([^"]*)"', board)]
    assert names == ["claude-code:anthropic/claude-opus-4-1", EVIL_AGENT, "codex:openai/gpt-5"]
    assert (
        "baseline · flagged" in dom and "baseline · errored" in dom and "baseline · missing" in dom
    )
    assert dom.count("<svg") == len(built.board.benchmarks) + 2
    # The browser parsed the trace's script tag as text: no script element, no injected image.
    assert "<script" not in dom and "<img" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    shot = out.with_name("overview.png")
    browse(out.as_uri(), f"--screenshot={shot}")
    assert shot.stat().st_size > 20_000


def test_fragment_shows_only_that_run(report):
    out, built = report
    assert probe(out) == {"main": True, "pages": []}
    run_id = IDS["flagged"]
    assert probe(out, f"#run-{run_id}") == {"main": False, "pages": [f"run-{run_id}"]}
    shot = out.with_name("run-page.png")
    browse(out.as_uri() + f"#run-{run_id}", f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000
