"""The sandbox backend's per-call latency against the process backend, same run, warm.

One command: ``python benchmarks/bench_sandbox.py [--calls N]`` (needs ``bwrap``).

The tool is ``add(a, b) -> a + b`` from a ``toolproof.toml`` written to a temporary
directory, with ``[tools.add] extensions = [["process"], ["sandbox"]]``, 2 warm
workers each; the sandbox's profile allows one loopback port, so its workers also
bind an egress listener and load the seccomp filter. The anchor is ``add_process``
(the same pool without bubblewrap, the audit hook and the per-call scratch reset);
samples alternate call by call, in 5 blocks, and the ratio reported is the median of
the per-block median ratios. Printed: median and p99 round trip and the ratio.
Target (issue 35): ratio <= 1.5. The script exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5
BLOCKS = 5

TOOLS = '''
import toolproof

@toolproof.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

TOML = """
[[python]]
module = "bench_tools"

[tools.add]
extensions = [["process"], ["sandbox"]]

[backends.sandbox]
allow = ["127.0.0.1:8099"]
"""


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _bench(config: Path, calls: int) -> bool:
    from toolproof.config import load_toolset

    async with load_toolset(config) as toolset:
        process, sandbox = toolset["add_process"], toolset["add_sandbox"]
        for variant in (process, sandbox):  # start and warm both pools
            for _ in range(max(calls // 10, 20)):
                assert (await variant.call({"a": 1, "b": 2})).value == 3
        samples: dict[str, list[float]] = {"process": [], "sandbox": []}
        ratios: list[float] = []
        for _ in range(BLOCKS):
            block: dict[str, list[float]] = {"process": [], "sandbox": []}
            for _ in range(calls // BLOCKS):
                for name, variant in (("process", process), ("sandbox", sandbox)):
                    began = time.perf_counter()
                    await variant.call({"a": 1, "b": 2})
                    block[name].append(time.perf_counter() - began)
            ratios.append(statistics.median(block["sandbox"]) / statistics.median(block["process"]))
            for name in samples:
                samples[name] += block[name]
    ratio = statistics.median(ratios)
    verdict = "ok" if ratio <= TARGET else "MISSED"
    print(f"sandbox vs process: {len(samples['sandbox'])} sequential calls each, 2 warm workers")
    print(f"  {'':10} {'median ms':>10} {'p99 ms':>10}")
    for name, values in samples.items():
        median, p99 = statistics.median(values) * 1e3, _percentile(values, 0.99) * 1e3
        print(f"  {name:10} {median:10.3f} {p99:10.3f}")
    blocks = " ".join(f"{r:.2f}" for r in ratios)
    print(f"  median ratio {ratio:.3f} (target <= {TARGET}): {verdict}   [blocks: {blocks}]")
    return ratio <= TARGET


def main() -> int:
    """Run the benchmark; 0 when the target holds, 1 when it is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "bench_tools.py").write_text(TOOLS, encoding="utf-8")
        config = Path(folder) / "toolproof.toml"
        config.write_text(TOML, encoding="utf-8")
        return 0 if asyncio.run(_bench(config, args.calls)) else 1


if __name__ == "__main__":
    sys.exit(main())
