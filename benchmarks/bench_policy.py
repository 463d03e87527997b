"""The per-call cost of a ``[policy]`` decision (issue 35 point 1, Performance).

One command: ``python benchmarks/bench_policy.py [--calls N] [--repeat R]``.

For policy sets of 1, 100 and 1,000 policies (one permit of ``transfer`` below an
amount for ``Agent::triage``, the rest permits of other tools that do not apply),
measured in the same run on the same request:

* ``toolproof``: :meth:`toolproof.tools.policy.PolicyGate.decide` on the ``transfer``
  tool: the request built from the tool and its arguments, Cedar asked, the
  determining ids mapped and the ``policy_decided`` fields built;
* ``cedarpy``: a bare ``cedarpy.is_authorized`` of the same request against the same
  pre-parsed ``cedarpy.PolicySet`` (the engine alone, the whole set);
* ``cedarpy, tool's``: the same against the pre-parsed set of the policies whose
  resource scope admits ``Tool::"transfer"`` (what toolproof gives Cedar:
  :func:`toolproof.tools.policy_source.for_tool`), so ``toolproof`` minus it is
  toolproof's own share.

Each figure is the median, over ``repeat`` interleaved rounds, of the mean CPU time
(``time.process_time``) of one call in a round of ``calls`` calls. Target: the
``toolproof`` figure under 50 us at 100 policies. Exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import cedarpy

from toolproof import Tool
from toolproof.tools.policy import ACTION, PolicyGate, PolicySet
from toolproof.tools.policy_source import for_tool

TARGET_US = 50.0
SIZES = (1, 100, 1000)
ARGS = {"to": "bob", "amount": 120}


async def transfer(to: str, amount: int) -> str:
    """Move amount (cents) to an account."""
    return f"sent {amount} to {to}"


def policies(count: int) -> str:
    """``count`` policies: the one that applies, then permits of other tools."""
    first = (
        '@id("small")\npermit(principal == Agent::"triage", action == Action::"call_tool", '
        'resource == Tool::"transfer") when { context.arguments.amount < 500 };\n'
    )
    rest = "".join(
        f'@id("other-{n}")\npermit(principal == Agent::"triage", action == Action::"call_tool", '
        f'resource == Tool::"tool_{n}") when {{ context.calls < {n + 1} }};\n'
        for n in range(count - 1)
    )
    return first + rest


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    """The mean CPU time of one ``fn()`` over ``calls`` calls, in microseconds."""
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def measure(count: int, calls: int, repeat: int) -> tuple[float, float, float]:
    """Median per-call microseconds (toolproof, bare cedarpy, its tool's) for ``count``."""
    policy = PolicySet((("bench.cedar", policies(count)),), "deny")
    tool = Tool.from_function(transfer)
    gate = PolicyGate(policy, "Agent::triage")
    parsed = cedarpy.PolicySet.from_str(policy.text)
    subset = for_tool(json.loads(cedarpy.policies_to_json_str(policy.text)), "transfer")
    own = parsed if subset is None else cedarpy.PolicySet.from_json_str(json.dumps(subset))
    resource = {"type": "Tool", "id": "transfer"}
    attributes = {"read_only": False, "destructive": False, "source": tool.source}
    entities = cedarpy.Entities.from_json_str(
        f'[{{"uid": {{"type": "Tool", "id": "transfer"}}, "attrs": '
        f'{{"read_only": false, "destructive": false, "source": "{tool.source}"}}, '
        '"parents": []}]'
    )
    request = {
        "principal": {"type": "Agent", "id": "triage"},
        "action": ACTION,
        "resource": resource,
        "context": {"arguments": ARGS, "calls": 0, "total_calls": 0, "elapsed_seconds": 0},
    }
    decision, _ = gate.decide(tool, ARGS)
    bare = cedarpy.is_authorized(request, parsed, entities)
    assert decision.decision == "allow" and decision.determining == ("small",), decision
    assert bare.allowed, bare
    assert attributes["source"] == tool.source
    ours, engine, tools = [], [], []
    for _ in range(repeat):
        ours.append(per_call_us(lambda: gate.decide(tool, ARGS), calls))
        engine.append(per_call_us(lambda: cedarpy.is_authorized(request, parsed, entities), calls))
        tools.append(per_call_us(lambda: cedarpy.is_authorized(request, own, entities), calls))
    return statistics.median(ours), statistics.median(engine), statistics.median(tools)


def main() -> int:
    """Print one line per policy-set size; exit 1 when the 100-policy target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    missed = False
    for count in SIZES:
        ours, engine, tools = measure(count, args.calls, args.repeat)
        print(
            f"{count:>5} policies: toolproof {ours:8.1f} us/call, bare cedarpy "
            f"{engine:8.1f} us/call, bare cedarpy on the tool's policies {tools:8.1f} us/call "
            f"(toolproof's own share {ours - tools:6.1f} us)"
        )
        if count == 100 and ours > TARGET_US:
            missed = True
    print(
        f"target: toolproof under {TARGET_US:.0f} us/call at 100 policies: "
        f"{'missed' if missed else 'met'}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
