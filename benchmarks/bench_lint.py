"""The cost of the tool-description lint at load (issue 35 point 3).

One command: ``python benchmarks/bench_lint.py [--servers S] [--tools T] [--repeat R]``.

Lints ``S * T`` tool definitions of ``S`` sources (each: a 3-sentence description
and 8 string properties with a description, an ``enum`` and a ``default``; every
description names one tool of the next source, so ``shadowing`` has work and every
tool has one finding) as :func:`toolproof.tools.lint_toolset.lint_toolset` does:
every tool against every other source's tool names. Anchor, in the same rounds:
``digest_json`` of the same definitions (what the lock already computes per tool,
its ``spec_digest``). Prints the median over ``repeat`` rounds of the CPU time
(``time.process_time``) per tool of each, and their ratio. Target: at most 2 ms per
tool at 500 tools (a load of 500 tools spends at most a second linting). Exits 1 when
it is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from toolproof.identity import digest_json
from toolproof.tools.lint import OtherTool, lint_definition

TARGET_MS = 2.0


def definitions(servers: int, tools: int) -> list[tuple[str, str, dict[str, Any]]]:
    """``(name, owner, definition)`` of every tool."""
    out = []
    for s in range(servers):
        for i in range(tools):
            other = f"srv{(s + 1) % servers}_tool_{i}"
            properties = {
                f"p{j}": {
                    "type": "string",
                    "description": f"The filter number {j} of the query; empty means any.",
                    "enum": ["a", "b", "c"],
                    "default": "a",
                }
                for j in range(8)
            }
            description = (
                "Return the items of a repository that match a query, newest first. "
                "Pages hold 50 items. "
                f"Combine with {other} for the details of one item."
            )
            out.append(
                (
                    f"srv{s}_tool_{i}",
                    f"mcp:srv{s}",
                    {
                        "name": f"srv{s}_tool_{i}",
                        "description": description,
                        "inputSchema": {"type": "object", "properties": properties},
                    },
                )
            )
    return out


def main() -> int:
    """Run the benchmark; 1 when the target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=5)
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    tools = definitions(options.servers, options.tools)
    others = [OtherTool(name, owner, (name.split("_", 1)[1],)) for name, owner, _ in tools]
    rounds, anchors = [], []
    findings = 0
    for _ in range(options.repeat):
        start = time.process_time()
        findings = sum(
            len(lint_definition(d, tool=name, owner=owner, others=others))
            for name, owner, d in tools
        )
        middle = time.process_time()
        for _, _, d in tools:
            digest_json(d)
        end = time.process_time()
        rounds.append((middle - start) / len(tools) * 1000)
        anchors.append((end - middle) / len(tools) * 1000)
    per_tool, anchor = statistics.median(rounds), statistics.median(anchors)
    print(
        f"{len(tools)} tools, {findings} findings: lint {per_tool:.3f} ms CPU per tool, "
        f"digest_json {anchor:.3f} ms ({per_tool / anchor:.1f}x; median of {options.repeat}; "
        f"target <= {TARGET_MS} ms)"
    )
    return 0 if per_tool <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
