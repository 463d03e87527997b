"""Extension overhead: pass-through wrapper layers and an ``args`` variant, per call.

One command: ``python benchmarks/bench_extensions.py [--calls N] [--repeat R]``.

Everything is measured in the same run on the same trivial function
``async def add(a: int, b: int) -> int``:

* a direct ``await add(1, 2)`` (the anchor) and ``Tool.call`` (0 layers) of two
  tools over ``add``: ``Tool.from_function(add)`` (pydantic converts the arguments
  and the result again inside the body) and a declared tool
  (``ToolContribution`` whose ``invoke`` is ``add(**arguments)``);
* the variant with 1, 3 and 5 pass-through wrapper layers
  (``@toolproof.wrapper`` whose body is ``return await call_next(arguments)``);
  the per-layer overhead is ``(t(k) - t(0)) / k``;
* a ``timeout`` variant (``seconds = 60``; the call sends no ``timeout_s``): its
  layer cost is ``t(timeout) - t(0)``, next to the pass-through layer's
  ``t(1 layer) - t(0)`` (the anchor). ``add`` ends without suspending, the case the
  layer takes no deadline for; so that figure is not read as every call's, the same
  two layers are also measured over ``add_suspending`` (``await asyncio.sleep(0)``
  first: the call suspends once and the loop runs), each against that tool's own
  0-layer call (reported, no target);
* an ``args`` variant renaming ``a`` to ``x`` (the outer variant validates, the
  inner tool runs on the mapped arguments without re-validating);
* FastMCP's transformed tool on the same function:
  ``Tool.from_tool(FunctionTool.from_function(add), transform_args={"a": ArgTransform(name="x")})``.

Each figure is the median, over ``repeat`` interleaved rounds, of the mean time of
one call in a round of ``calls`` calls. Time is this process's CPU time
(``time.process_time``), so other processes on a shared machine do not count;
every path here runs on the event loop's thread. Differences and ratios are
taken within a round, then the median over rounds. Targets (issue 4, issue 14 point 6):
each pass-through layer adds <= 1 us; the ``timeout`` layer adds <= 1 us; the ``args``
variant costs <= 0.1x FastMCP's transformed call. The script exits 1 when a target is
missed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ext_tools import ARGS, add, add_invoke, add_suspending
from fastmcp.tools import FunctionTool
from fastmcp.tools import Tool as FastMCPTool
from fastmcp.tools.tool_transform import ArgTransform

from toolproof import Tool, ToolContribution, bind_contribution
from toolproof.extensions import ComboElement, ExtensionRegistry, build_combo, wrapper

RENAMED = {"x": 1, "b": 2}
LAYERS = (1, 3, 5)


def variants(base: Tool) -> dict[str, Tool]:
    """The pass-through stacks and the ``args`` variant over ``base``."""
    registry = ExtensionRegistry()

    @wrapper(name="noop", registry=registry)
    async def noop(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
        return await call_next(arguments)

    stack = build_combo(base, [ComboElement("noop")] * max(LAYERS), registry=registry)
    out = {f"{k} layers": stack[k - 1][1] for k in LAYERS}
    args = ComboElement("args", {"rename": {"a": "x"}})
    out["args"] = build_combo(base, [args], registry=registry)[0][1]
    timeout = ComboElement("timeout", {"seconds": 60})
    out["timeout"] = build_combo(base, [timeout], registry=registry)[0][1]
    return out


async def main(calls: int, repeat: int) -> int:
    base = Tool.from_function(add)
    declared = bind_contribution(
        ToolContribution("add", "Add.", base.spec.input_schema, add_invoke)
    )
    ours = variants(base)
    ours_declared = variants(declared)
    suspending = Tool.from_function(add_suspending)
    ours_suspending = variants(suspending)
    fastmcp = FastMCPTool.from_tool(
        FunctionTool.from_function(add), transform_args={"a": ArgTransform(name="x")}
    )

    paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "direct await add(1, 2)": lambda: add(1, 2),
        "from_function: 0 layers": lambda: base.call(ARGS),
        **{
            f"from_function: {k} layers": (lambda t=ours[f"{k} layers"]: t.call(ARGS))
            for k in LAYERS
        },
        "from_function: timeout variant": lambda: ours["timeout"].call(ARGS),
        "from_function: args variant": lambda: ours["args"].call(RENAMED),
        "declared: 0 layers": lambda: declared.call(ARGS),
        **{
            f"declared: {k} layers": (lambda t=ours_declared[f"{k} layers"]: t.call(ARGS))
            for k in LAYERS
        },
        "declared: timeout variant": lambda: ours_declared["timeout"].call(ARGS),
        "declared: args variant": lambda: ours_declared["args"].call(RENAMED),
        "FastMCP transformed tool": lambda: fastmcp.run(RENAMED),
        "suspending: 0 layers": lambda: suspending.call(ARGS),
        "suspending: 1 layers": lambda: ours_suspending["1 layers"].call(ARGS),
        "suspending: timeout variant": lambda: ours_suspending["timeout"].call(ARGS),
    }
    for name, fn in paths.items():
        value = await fn()
        if name.startswith("FastMCP"):
            value = value.structured_content["result"]
        elif not isinstance(value, int):
            value = value.unwrap()
        assert value == 3, (name, value)

    rounds: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(repeat):
        for name, fn in paths.items():
            n = max(calls // 10, 50) if name.startswith(("FastMCP", "suspending")) else calls
            start = time.process_time()
            for _ in range(n):
                await fn()
            rounds[name].append((time.process_time() - start) / n * 1e6)
    median = {name: statistics.median(values) for name, values in rounds.items()}

    def paired(name: str, anchor: str, scale: float = 1.0) -> float:
        """Median over rounds of (name - anchor) / scale, both measured in the same round."""
        pairs = zip(rounds[name], rounds[anchor], strict=True)
        return statistics.median((value - base) / scale for value, base in pairs)

    def ratio(name: str, anchor: str) -> float:
        pairs = zip(rounds[name], rounds[anchor], strict=True)
        return statistics.median(value / base for value, base in pairs)

    anchor = median["direct await add(1, 2)"]
    fast = median["FastMCP transformed tool"]
    print(f"{'path':34} {'us/call':>9} {'x direct':>9} {'x FastMCP':>10}")
    for name, value in median.items():
        print(f"{name:34} {value:9.3f} {value / anchor:9.1f} {value / fast:10.3f}")
    ok = True
    print()
    for family in ("from_function", "declared"):
        zero = f"{family}: 0 layers"
        for k in LAYERS:
            per_layer = paired(f"{family}: {k} layers", zero, k)
            verdict = "ok" if per_layer <= 1.0 else "MISSED"
            ok &= per_layer <= 1.0
            print(f"{family}: {k} layers: {per_layer:.3f} us per layer (target <= 1 us) {verdict}")
        timeout_layer = paired(f"{family}: timeout variant", zero)
        pass_through = paired(f"{family}: 1 layers", zero)
        verdict = "ok" if timeout_layer <= 1.0 else "MISSED"
        ok &= timeout_layer <= 1.0
        print(
            f"{family}: timeout layer: {timeout_layer:.3f} us over the base call "
            f"(pass-through layer {pass_through:.3f} us; target <= 1 us) {verdict}"
        )
        args_layer = paired(f"{family}: args variant", zero)
        print(f"{family}: args layer itself: {args_layer:.3f} us over the base call")
        share = ratio(f"{family}: args variant", "FastMCP transformed tool")
        verdict = "ok" if share <= 0.1 else "MISSED"
        ok &= share <= 0.1
        print(
            f"{family}: args variant / FastMCP transformed = {share:.3f} (target <= 0.1) {verdict}"
        )
    timeout_layer = paired("suspending: timeout variant", "suspending: 0 layers")
    pass_through = paired("suspending: 1 layers", "suspending: 0 layers")
    print(
        f"suspending: timeout layer: {timeout_layer:.3f} us over the base call "
        f"(pass-through layer {pass_through:.3f} us; a call that suspends once, no target)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per round")
    parser.add_argument("--repeat", type=int, default=15, help="interleaved rounds")
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.calls, options.repeat)))
