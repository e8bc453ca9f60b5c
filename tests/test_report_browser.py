"""The report opens in a real browser: Debian's headless Chromium, with no network at all.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: file
descriptors 3 and 4, NUL-separated JSON), so no port is opened and no websocket client is
needed. It runs in an empty network namespace (``unshare -n``) when the kernel allows it, and
always with a proxy and host rules that lead nowhere. The tests record console messages,
uncaught exceptions, log entries and every request the page makes: billing's report and a
pipeline comparison's (order_payments, with its embedded PNG and audit links).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lklab.report import write_report
from lklab.report.pipeline_render import write_pipeline_report
from tests.pipeline_report_fixtures import sample_pipeline_report
from tests.report_fixtures import sample_report

INSTALL_HINT = "Chromium is needed for this test: install it with `apt-get install -y chromium` (Debian package)."
TIMEOUT_SECONDS = 60
_TRAMPOLINE = (
    "import os, sys\n"
    "commands, replies = os.dup(int(sys.argv[1])), os.dup(int(sys.argv[2]))\n"
    "os.dup2(commands, 3); os.dup2(replies, 4); os.set_inheritable(3, True); os.set_inheritable(4, True)\n"
    "for fd in {commands, replies, int(sys.argv[1]), int(sys.argv[2])} - {3, 4}: os.close(fd)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(INSTALL_HINT, pytrace=False)


def _offline_prefix() -> list[str]:
    """``unshare -n`` when this process may create a network namespace, else nothing."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n"]
    return []


class DevTools:
    """A DevTools protocol session with a Chromium started on ``--remote-debugging-pipe``."""

    def __init__(self, command: list[str]) -> None:
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # The protocol expects commands on fd 3 and replies on fd 4. A small exec trampoline
        # moves the pipe ends there (a preexec_fn is unsafe in a process with threads, as a
        # test run holding a Spark gateway is).
        self.process = subprocess.Popen(
            [sys.executable, "-c", _TRAMPOLINE, str(to_browser_read), str(from_browser_write), *command],
            pass_fds=(to_browser_read, from_browser_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        reply = self._read_until(lambda m: m.get("id") == self._next_id, f"a reply to {method}")
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, method: str) -> dict:
        seen = next((e for e in self.events if e.get("method") == method), None)
        return seen or self._read_until(lambda m: m.get("method") == method, method)

    def _read_until(self, wanted, what: str) -> dict:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise AssertionError(f"Chromium sent no {what} within {TIMEOUT_SECONDS} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise AssertionError(f"Chromium closed the pipe before {what} (exit code {self.process.poll()})")
            self._buffer += chunk

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self._next_id += 1
                os.write(
                    self._to_browser, json.dumps({"id": self._next_id, "method": "Browser.close"}).encode() + b"\0"
                )
                self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)


_PAGE_FACTS = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const box = e => { const r = e.getBoundingClientRect(); return {id: e.id, width: r.width, height: r.height}; };
  return {
    title: document.title,
    sections: [...document.querySelectorAll('section')].map(s => s.id),
    plots: [...document.querySelectorAll('svg.plot')].map(box),
    scripts: document.querySelectorAll('script').length,
    winners: document.querySelectorAll('table.comparison td.winner').length,
    comparisonRows: document.querySelectorAll('table.comparison tr[data-metric]').length,
    auditRows: [...document.querySelectorAll('details.audit')].map(d => d.querySelectorAll('table.late-events tbody tr').length),
    auditVisible: [...document.querySelectorAll('table.late-events')].every(t => t.getBoundingClientRect().height > 0),
    meta: document.getElementById('meta').textContent,
    bodyWidth: document.body.getBoundingClientRect().width,
  };
})()"""


def _open(html: Path, profile: Path, facts_script: str, viewport: tuple[int, int] | None = None):
    """Open ``html`` from disk; the page's facts (``facts_script``'s value), every protocol event, and
    the URL. ``viewport``: the page's width and height in CSS pixels (default: the window's)."""
    command = _offline_prefix() + [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1280,2000",
        "about:blank",
    ]
    browser = DevTools(command)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.send(f"{domain}.enable", session=session)
        if viewport is not None:
            width, height = viewport
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
        url = html.resolve().as_uri()
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_for("Page.loadEventFired")
        facts = browser.send("Runtime.evaluate", {"expression": facts_script, "returnByValue": True}, session=session)
        return facts["result"]["value"], list(browser.events), url
    finally:
        browser.close()


def _problems(events: list[dict]) -> list[dict]:
    """Console errors and warnings, uncaught exceptions and error log entries."""
    return [
        e["params"]
        for e in events
        if e["method"] == "Runtime.exceptionThrown"
        or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "warning", "assert"))
        or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] in ("error", "warning"))
    ]


@pytest.fixture(scope="module")
def opened_report(tmp_path_factory):
    """Billing's ``report.html`` opened from disk: its facts, every protocol event, and the URL."""
    files = write_report(sample_report(), tmp_path_factory.mktemp("report"))
    return _open(files.html, tmp_path_factory.mktemp("chromium-profile"), _PAGE_FACTS)


def test_report_renders_with_its_sections_and_plots(opened_report):
    facts, _, _ = opened_report
    assert facts["title"] == "Lambda vs Kappa — run-20260106T000500Z"
    assert facts["sections"] == [
        "decision",
        "side-by-side",
        "tradeoff",
        "error",
        "arrival",
        "gaps",
        "audit",
        "method",
        "definitions",
    ]
    assert [p["id"] for p in facts["plots"]] == [
        "plot-decision",
        "plot-tradeoff",
        "plot-error",
        "plot-arrival-delay",
        "plot-gaps-0",
    ]
    assert all(p["width"] > 100 and p["height"] > 50 for p in facts["plots"]), facts["plots"]
    assert facts["scripts"] == 0
    assert facts["comparisonRows"] > 20 and facts["winners"] > 0
    assert facts["auditRows"] == [3, 3, 3] and facts["auditVisible"]
    assert "billing <script>alert(1)</script>" in facts["meta"]  # escaped text shows as text
    assert facts["bodyWidth"] > 600


def test_report_has_no_console_errors_and_loads_nothing_else(opened_report):
    _, events, url = opened_report
    assert _problems(events) == []
    requested = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    assert requested and all(u == url or u.startswith("data:") for u in requested), requested


_PIPELINE_FACTS = """(() => {
  const plot = document.getElementById('plot-error');
  return {
    title: document.title,
    sections: [...document.querySelectorAll('section')].map(s => s.id),
    plot: {complete: plot.complete, naturalWidth: plot.naturalWidth, width: plot.getBoundingClientRect().width},
    tables: [...document.querySelectorAll('table')].map(t => [t.className, t.querySelectorAll('tbody tr').length]),
    meta: document.getElementById('meta').textContent,
    scripts: document.querySelectorAll('script').length,
    bodyWidth: document.body.getBoundingClientRect().width,
  };
})()"""


@pytest.fixture(scope="module")
def opened_pipeline_report(tmp_path_factory):
    """An order_payments ``report.html`` (with its audit links) opened from disk."""
    reports = tmp_path_factory.mktemp("reports")
    files = write_pipeline_report(sample_pipeline_report(reports), reports / "op")
    return _open(files.html, tmp_path_factory.mktemp("chromium-profile"), _PIPELINE_FACTS)


def test_pipeline_report_renders_its_tables_and_plot_and_loads_nothing_else(opened_pipeline_report):
    facts, events, url = opened_pipeline_report
    assert facts["title"] == "Lambda vs Kappa on order_payments — op"
    assert facts["sections"] == ["decision", "side-by-side", "verdicts", "error", "audit", "method"]
    assert facts["tables"] == [["headline", 7], ["side-by-side", 27], ["audits", 2], ["streams", 2]]
    assert facts["plot"]["complete"] and facts["plot"]["naturalWidth"] > 300 and facts["plot"]["width"] > 300, facts[
        "plot"
    ]
    assert "source hand-made <b>& ·" in facts["meta"]  # escaped text shows as text
    assert facts["scripts"] == 0 and facts["bodyWidth"] > 600
    assert _problems(events) == []
    requested = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    assert requested and all(u == url or u.startswith("data:") for u in requested), requested


FIRST_SCREEN = (1400, 900)
_FIRST_SCREEN_FACTS = """(() => {
  const seen = e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth; };
  const headline = document.querySelector('table.headline');
  const plot = document.getElementById('plot-decision');
  return {
    viewport: [window.innerWidth, window.innerHeight],
    scrolled: window.scrollY,
    recommended: document.getElementById('recommended').textContent,
    recommendedSeen: seen(document.getElementById('recommended')),
    columns: [...headline.querySelectorAll('thead th[data-config]')].map(th => [th.textContent, seen(th)]),
    rows: [...headline.querySelectorAll('tbody tr')].map(tr => [tr.querySelector('th').textContent, seen(tr)]),
    chosen: [...headline.querySelectorAll('thead th.chosen')].map(th => th.textContent),
    plotSeen: plot !== null && seen(plot),
  };
})()"""


def _with_curve(report):
    """``report`` with an advisor's curve: its answer also names the curve's delay (5m) reaching the target."""
    import dataclasses
    from decimal import Decimal as D

    from lklab.report.curve import CurvePoint, WatermarkCurve

    points = (
        CurvePoint("0", 40, {"USD": D("120.5")}, D("0.9"), D(0), D(0)),
        CurvePoint("10s", 12, {"USD": D("30")}, D("0.95"), D(10), D(12)),
        CurvePoint("5m", 0, {}, D("1"), D(300), D(300)),
    )
    return dataclasses.replace(report, watermark_curve=WatermarkCurve(points, source="lklab advise"))


@pytest.mark.parametrize("kind", ["billing", "billing with the advisor's curve", "pipeline"])
def test_the_first_screen_holds_the_decision(kind, tmp_path):
    """At 1400x900, without scrolling: the recommendation, each architecture's headline figures
    (every row of the table, both columns) and the figure of the swept configurations."""
    if kind.startswith("billing"):
        report = sample_report() if kind == "billing" else _with_curve(sample_report())
        html = write_report(report, tmp_path / "report").html
        expected = ("Kappa W=1m L=0", ["Lambda W=10s L=0", "Kappa W=1m L=0"], 7)
    else:
        html = write_pipeline_report(sample_pipeline_report(tmp_path), tmp_path / "op").html
        expected = ("Kappa W=10m L=0", ["Lambda W=0s L=0", "Kappa W=10m L=0"], 7)
    facts, events, _ = _open(html, tmp_path / "profile", _FIRST_SCREEN_FACTS, viewport=FIRST_SCREEN)
    recommended, columns, rows = expected
    assert facts["viewport"] == list(FIRST_SCREEN) and facts["scrolled"] == 0
    assert recommended in facts["recommended"] and facts["recommendedSeen"]
    assert facts["columns"] == [[label, True] for label in columns]
    assert facts["chosen"] == [recommended]
    assert len(facts["rows"]) == rows and all(seen for _, seen in facts["rows"]), facts["rows"]
    assert facts["plotSeen"]
    assert _problems(events) == []
