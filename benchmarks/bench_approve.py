"""The per-call cost of an ``approve`` layer whose rule does not match (issue 16, Done when).

One command: ``python benchmarks/bench_approve.py [--calls N] [--repeat R]``.

Measured in the same run on the same function
``async def delete_branch(branch: str, force: bool = False) -> str``, called with
``{"branch": "feature"}``:

* ``Tool.call`` of the base tool (0 layers);
* a pass-through wrapper variant (``@toolproof.wrapper`` whose body is
  ``return await call_next(arguments)``): the anchor;
* ``delete_branch_approve`` with ``[[approvals.rules]] arguments = {"/force" = true}``:
  the rule is evaluated on every call (one JSON Pointer) and does not match;
* ``delete_branch_approve`` with ``when = {destructiveHint = true}`` on a tool that
  does not state it: no rule can match, decided when the variant is built.

No call is gated, so no store is touched (the store folder is a temporary one). Each
figure is the median, over ``repeat`` interleaved rounds, of the mean CPU time
(``time.process_time``) of one call in a round of ``calls`` calls; the layer cost is
the approve variant's time minus the pass-through variant's, taken within a round.
Target: <= 2 us per call over the pass-through wrapper. Exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolproof import Tool
from toolproof.extensions import ApplyContext, ComboElement, ExtensionRegistry, build_combo, wrapper

ARGS = {"branch": "feature"}
TARGET_US = 2.0


async def delete_branch(branch: str, force: bool = False) -> str:
    """Delete a branch (here: say so)."""
    return branch


def variants(base: Tool, folder: Path) -> dict[str, Tool]:
    """The pass-through variant and the two approve variants over ``base``."""
    registry = ExtensionRegistry()

    @wrapper(name="noop", registry=registry)
    async def noop(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
        return await call_next(arguments)

    context = ApplyContext(base_dir=folder)
    per_call = {"rules": [{"arguments": {"/force": True}}]}
    static = {"rules": [{"when": {"destructiveHint": True}}]}

    def one(element: ComboElement) -> Tool:
        return build_combo(base, [element], registry=registry, context=context)[0][1]

    return {
        "pass-through wrapper": one(ComboElement("noop")),
        "approve, argument rule not matching": one(ComboElement("approve", per_call)),
        "approve, when never holds": one(ComboElement("approve", static)),
    }


async def main(calls: int, repeat: int) -> int:
    base = Tool.from_function(delete_branch)
    with tempfile.TemporaryDirectory() as folder:
        tools = variants(base, Path(folder))
        paths: dict[str, Callable[[], Awaitable[Any]]] = {
            "base tool: 0 layers": lambda: base.call(ARGS),
            **{name: (lambda t=tool: t.call(ARGS)) for name, tool in tools.items()},
        }
        for name, fn in paths.items():
            assert (await fn()).unwrap() == "feature", name
        rounds: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(repeat):
            for name, fn in paths.items():
                start = time.process_time()
                for _ in range(calls):
                    await fn()
                rounds[name].append((time.process_time() - start) / calls * 1e6)
        assert not any(Path(folder).iterdir()), "a non-matching call touched the store"

    def paired(name: str, anchor: str) -> float:
        pairs = zip(rounds[name], rounds[anchor], strict=True)
        return statistics.median(value - base for value, base in pairs)

    print(f"{'path':38} {'us/call':>9}")
    for name, values in rounds.items():
        print(f"{name:38} {statistics.median(values):9.3f}")
    print()
    anchor = "pass-through wrapper"
    print(f"pass-through layer: {paired(anchor, 'base tool: 0 layers'):.3f} us over the base call")
    ok = True
    for name in tools:
        if name == anchor:
            continue
        cost = paired(name, anchor)
        verdict = "ok" if cost <= TARGET_US else "MISSED"
        ok &= cost <= TARGET_US
        print(f"{name}: {cost:.3f} us over the pass-through wrapper (target <= 2 us) {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per round")
    parser.add_argument("--repeat", type=int, default=15, help="interleaved rounds")
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.calls, options.repeat)))
