"""Instructions per call of a ``timeout`` layer and of a pass-through layer (callgrind).

One command: ``python benchmarks/count_extensions.py [--calls N]`` (needs ``valgrind``).

The same paths as ``bench_extensions.py`` (``Tool.from_function(add)``, the
declared tool over ``add`` and ``Tool.from_function(add_suspending)``, which yields to
the loop once; 0 layers, 1 pass-through wrapper layer, the ``timeout`` variant with
``seconds = 60`` called without ``timeout_s``), counted in instructions
instead of timed: a count is repeatable on a loaded, shared machine where
microseconds are not. Each path runs in its own ``valgrind --tool=callgrind`` child
that builds every path and warms each up (the same work in every child), then makes
``N`` calls of its path; a child that makes no call is the setup anchor (so do not
edit the sources while it runs: a child that compiles a module counts that too). Per call:
``(instructions(path, N) - instructions(setup)) / N``; a layer's cost is its
variant's per call minus the 0-layer path's (the anchor, from the same script run).
Instructions are not time (a cache miss or a branch mispredict costs many, an
instruction under callgrind none of its latency), so read them next to the
``bench_extensions.py`` figures, not instead of them.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from typing import Any

from callgrind import instructions
from ext_tools import ARGS, add, add_invoke, add_suspending

from toolproof import Tool, ToolContribution, bind_contribution
from toolproof.extensions import ComboElement, ExtensionRegistry, build_combo, wrapper

FAMILIES = ("from_function", "declared", "suspending")
PATHS = tuple(
    f"{family}: {path}"
    for family in FAMILIES
    for path in ("0 layers", "1 layer", "timeout variant")
)
WARMUP = 200


def tools() -> dict[str, Tool]:
    """Every path's outermost tool, as ``bench_extensions.py`` builds it."""
    registry = ExtensionRegistry()

    @wrapper(name="noop", registry=registry)
    async def noop(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
        return await call_next(arguments)

    base = Tool.from_function(add)
    declared = bind_contribution(
        ToolContribution("add", "Add.", base.spec.input_schema, add_invoke)
    )
    out: dict[str, Tool] = {}
    noop_layer = ComboElement("noop")
    timeout = ComboElement("timeout", {"seconds": 60})
    suspending = Tool.from_function(add_suspending)
    for family, tool in zip(FAMILIES, (base, declared, suspending), strict=True):
        out[f"{family}: 0 layers"] = tool
        out[f"{family}: 1 layer"] = build_combo(tool, [noop_layer], registry=registry)[0][1]
        out[f"{family}: timeout variant"] = build_combo(tool, [timeout], registry=registry)[0][1]
    return out


async def child(path: str | None, calls: int) -> None:
    """Build and warm up every path, then make ``calls`` calls of ``path``."""
    built = tools()
    for tool in built.values():
        for _ in range(WARMUP):
            result = await tool.call(ARGS)
        assert result.unwrap() == 3
    if path is None:
        return
    call = built[path].call
    for _ in range(calls):
        await call(ARGS)


def count(path: str | None, calls: int) -> int:
    """Instructions callgrind counts for one child."""
    return instructions(__file__, "--child", path or "", "--calls", str(calls))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per child")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        asyncio.run(child(options.child or None, options.calls))
        return 0
    # a native child first writes the bytecode caches: no valgrind child compiles a module
    subprocess.run([sys.executable, __file__, "--child", "", "--calls", "0"], check=True)
    setup = count(None, 0)
    per_call = {path: (count(path, options.calls) - setup) / options.calls for path in PATHS}
    print(f"{'path':32} {'instructions/call':>18}")
    for path, value in per_call.items():
        print(f"{path:32} {value:18.0f}")
    print()
    for family in FAMILIES:
        zero = per_call[f"{family}: 0 layers"]
        layer = per_call[f"{family}: 1 layer"] - zero
        timeout = per_call[f"{family}: timeout variant"] - zero
        print(
            f"{family}: timeout layer {timeout:.0f} instructions, pass-through layer "
            f"{layer:.0f} (ratio {timeout / layer:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
