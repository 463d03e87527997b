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

Run: ``python benchmarks/bench_viewer.py [--calls 10000]`` (needs ``pip install -e
'.[dev]'`` and /usr/bin/chromium: ``.ci/services`` installs it).
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
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from toolproof import Tool, Toolset
from toolproof.contract.runs import RunSpec
from toolproof.runs.run import execute_run
from toolproof.verify.verifier import verify_run

ROUNDS = 5


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


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="tool calls (default 10000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as tmp:
        root = Path(tmp)
        run_id = _run(root, args.calls)
        started = time.perf_counter()
        assert verify_run(root / "runs" / run_id).ok
        anchor = time.perf_counter() - started
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
            timeline, verified = [], []
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium",
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                )
                for _ in range(ROUNDS):
                    page = browser.new_page()
                    started = time.perf_counter()
                    page.goto(f"http://127.0.0.1:{port}/#/run/{run_id}")
                    page.wait_for_selector("#app[data-ready=timeline], #app[data-ready=run]")
                    timeline.append(time.perf_counter() - started)
                    page.wait_for_selector("#app[data-ready=run]", timeout=120_000)
                    verified.append(time.perf_counter() - started)
                    assert page.get_attribute("#verdict .verdict", "data-verdict") == "passed"
                    page.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(10)
    events = args.calls * 5 + 10
    print(f"viewer: a {args.calls}-call run (~{events} events), median of {ROUNDS} page loads")
    print(f"  timeline on screen : {statistics.median(timeline):.2f} s (target < 2 s)")
    print(f"  verified and shown : {statistics.median(verified):.2f} s")
    print(f"  anchor verify_run  : {anchor:.2f} s in-process, same run")


if __name__ == "__main__":
    main()
