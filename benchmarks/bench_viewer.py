"""The viewer on a big run: a 10,000-call run's page in headless Chromium (target < 2 s).

Builds the 10,000-call run of ``bench_runs.py`` (one ``echo`` call per step), serves it
with ``toolproof view`` and opens its run page in Debian's Chromium through Playwright.
Reported, each the median of 5 loads of a fresh page:

* timeline: until the header and the first timeline page are on screen (the page is
  usable; the timeline pages in 300 events at a time as you scroll);
* verified: until verification has finished and the claims, checks and descriptor
  are shown;
* anchor: ``verify_run`` of the same run called in-process, measured in the same run
  (the page cannot be faster than the verification it shows).

``--session-calls N`` (issue 31 point 5) measures a recorded session instead: one run
of N calls of ``bench_scale.py``'s 1,200-byte ``fetch`` (``record_session``,
``segment_calls=0``; about 3.1 kB of trace a call), served by ``toolproof view`` beside
a 10-call session recorded the same way (the anchor, same server, same run):

* API, each the median of 20 requests: the first trace page (``GET …/trace?limit=300``);
  the last page (``?cursor=`` of the trace's last 300 events); ``…/summary`` the first
  time (the trace's calls counted in one pass) and again (remembered);
* browser, the median of 5 loads: the run page until its first 300 events are on
  screen (``data-ready=timeline``).

Run: ``python benchmarks/bench_viewer.py [--calls 10000]`` or ``python
benchmarks/bench_viewer.py --session-calls 100000`` (needs ``pip install -e '.[dev]'``
and /usr/bin/chromium: ``.ci/services`` installs it).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from bench_scale import fetch
from playwright.sync_api import sync_playwright

import toolproof
from toolproof import Tool, Toolset
from toolproof.bundle.tracepages import TraceLocator
from toolproof.contract.runs import RunSpec
from toolproof.runs.run import execute_run
from toolproof.verify.verifier import verify_run

ROUNDS = 5
REQUESTS = 20
PAGE = 300


def _run(root: Path, calls: int) -> str:
    async def echo(n: int) -> dict[str, Any]:
        return {"n": n, "square": n * n}

    toolset = Toolset()
    toolset.add(Tool.from_function(echo, name="echo", description="Echo n and n*n."))
    toolset.seal()
    steps = [{"id": f"s{i}", "tool": "echo", "arguments": {"n": i}} for i in range(calls)]
    claims = [
        {
            "statement": "The last square is {sq}.",
            "cite": {"sq": f"steps.s{calls - 1}.value.square"},
        }
    ]
    spec = RunSpec.model_validate(
        {"task": "many calls", "steps": steps, "reasoner": {"params": {"claims": claims}}}
    )
    return asyncio.run(execute_run(spec, root=root, toolset=toolset)).run_id


async def _session(root: Path, calls: int) -> str:
    """One run of ``calls`` recorded calls of ``fetch`` (1,200-byte results)."""
    toolset = Toolset()
    toolset.add(Tool.from_function(fetch))
    toolset.seal()
    task = f"{calls} calls"
    async with toolproof.record_session(toolset, root=root, task=task, segment_calls=0) as s:
        for i in range(calls):
            await s.call("fetch", {"i": i})
    return s.run_id


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _viewer(root: Path) -> Iterator[str]:
    """``toolproof view`` over ``root`` until the block ends; yields its base URL."""
    port = _port()
    server = subprocess.Popen(
        [sys.executable, "-m", "toolproof", "view", "--root", str(root), "--port", str(port)],
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def _chromium() -> Iterator[Any]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield browser
        finally:
            browser.close()


def _load(browser: Any, url: str, *until: str) -> list[float]:
    """Seconds from opening ``url`` until each ``#app[data-ready=…]`` in ``until``."""
    page = browser.new_page()
    started = time.perf_counter()
    page.goto(url)
    times = []
    for ready in until:
        # "timeline" is over once "run" is shown (a small run verifies at once)
        seen = "#app[data-ready=timeline], #app[data-ready=run]" if ready == "timeline" else ""
        page.wait_for_selector(seen or f"#app[data-ready={ready}]", timeout=600_000)
        times.append(time.perf_counter() - started)
    # untimed: let the verification the page asked for end, so that it does not share
    # the server with the next load; then the page says what verify says
    page.wait_for_selector("#app[data-ready=run]", timeout=600_000)
    assert page.get_attribute("#verdict .verdict", "data-verdict") == "passed"
    page.close()
    return times


def _median(request: Callable[[], object], rounds: int = REQUESTS) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        request()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _page_figures(base: str, run: Path, browser: Any) -> dict[str, float]:
    """The API and browser figures of one run (see the module docstring)."""
    trace = run / "trace.jsonl"
    lines = sum(1 for _ in trace.open("rb"))
    last = TraceLocator().cursor_at(trace, max(lines - PAGE, 0))
    url = f"{base}/v1/runs/{run.name}"

    def get(path: str, **params: object) -> httpx.Response:
        answer = httpx.get(url + path, params=params, timeout=600)
        answer.raise_for_status()
        return answer

    started = time.perf_counter()
    get("/summary")
    summary_first = time.perf_counter() - started
    return {
        "first page (API)": _median(lambda: get("/trace", limit=PAGE)),
        "last page by cursor (API)": _median(lambda: get("/trace", limit=PAGE, cursor=last)),
        "summary, first": summary_first,
        "summary, again": _median(lambda: get("/summary")),
        "timeline on screen (browser)": statistics.median(
            _load(browser, f"{base}/#/run/{run.name}", "timeline")[0] for _ in range(ROUNDS)
        ),
    }


def session_main(calls: int) -> None:
    """Figures of a ``calls``-call recorded session against a 10-call one (same server)."""
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        big = root / "runs" / asyncio.run(_session(root, calls))
        recorded = time.perf_counter() - started
        small = root / "runs" / asyncio.run(_session(root, 10))
        size = (big / "trace.jsonl").stat().st_size
        with _viewer(root) as base, _chromium() as browser:
            figures = [_page_figures(base, run, browser) for run in (small, big)]
    print(f"viewer and API on a recorded session of {calls} calls: trace {size / 1e6:.1f} MB")
    print(f"  (recorded and finalized in {recorded:.0f} s); anchor: a 10-call session")
    print(f"  {'figure':30} {'10 calls':>10} {f'{calls} calls':>14}")
    for name in figures[0]:
        print(f"  {name:30} {figures[0][name]:9.3f}s {figures[1][name]:13.3f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="tool calls (default 10000)")
    parser.add_argument(
        "--session-calls", type=int, default=0, help="measure a recorded session of N calls"
    )
    args = parser.parse_args()
    if args.session_calls:
        session_main(args.session_calls)
        return
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as tmp:
        root = Path(tmp)
        run_id = _run(root, args.calls)
        started = time.perf_counter()
        assert verify_run(root / "runs" / run_id).ok
        anchor = time.perf_counter() - started
        timeline, verified = [], []
        with _viewer(root) as base, _chromium() as browser:
            for _ in range(ROUNDS):
                on_screen, done = _load(browser, f"{base}/#/run/{run_id}", "timeline", "run")
                timeline.append(on_screen)
                verified.append(done)
    events = args.calls * 5 + 10
    print(f"viewer: a {args.calls}-call run (~{events} events), median of {ROUNDS} page loads")
    print(f"  timeline on screen : {statistics.median(timeline):.2f} s (target < 2 s)")
    print(f"  verified and shown : {statistics.median(verified):.2f} s")
    print(f"  anchor verify_run  : {anchor:.2f} s in-process, same run")


if __name__ == "__main__":
    main()
