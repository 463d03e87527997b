"""Helpers shared by the run, bundle and verify tests: a counting Toolset, specs, tampering."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolproof import Tool, Toolset
from toolproof.bundle.manifest import build_manifest
from toolproof.contract.layout import MANIFEST_FILE
from toolproof.contract.runs import RunSpec
from toolproof.identity import canonical_json, digest
from toolproof.runs.executor import StepHandler
from toolproof.runs.registries import RunRegistries
from toolproof.runs.run import RunOutcome, execute_run

STOCK = {
    "apple": {"count": 12, "shelf": "A1", "note": "Apples arrived on Monday."},
    "plum": {"count": 7, "shelf": "B4", "note": "Plums are kept cold on shelf B4."},
}


@dataclass
class Counter:
    """Counts live tool calls (bodies actually run)."""

    calls: int = 0


def fetch(i: int) -> str:
    """Return document ``i``."""
    return f"document {i}"


def fetch_toolset() -> Toolset:
    """A sealed Toolset of one tool, ``fetch(i)`` -> ``"document <i>"`` (the segment tests)."""
    toolset = Toolset()
    toolset.add(Tool.from_function(fetch))
    toolset.seal()
    return toolset


def make_toolset(counter: Counter, *, description: str = "Look up stock.") -> Toolset:
    async def stock(item: str) -> dict[str, Any]:
        counter.calls += 1
        if item not in STOCK:
            raise KeyError(f"no such item: {item}")
        return {"item": item, **STOCK[item]}

    async def total(items: list[str]) -> int:
        counter.calls += 1
        return sum(int(STOCK[item]["count"]) if item in STOCK else 0 for item in items)

    async def slow(seconds: float) -> str:
        counter.calls += 1
        await asyncio.sleep(seconds)
        return "slept"

    async def text(topic: str) -> str:
        counter.calls += 1
        return f"Report on {topic}. The {topic} shelf is full. Nothing else to add."

    toolset = Toolset()
    toolset.add(Tool.from_function(stock, description=description))
    toolset.add(Tool.from_function(total, description="Sum the counts of items."))
    toolset.add(Tool.from_function(slow, description="Sleep, then answer."))
    toolset.add(Tool.from_function(text, description="A text report."))
    return toolset.seal()


def base_spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "task": "Count the fruit.",
        "steps": [
            {"id": "apples", "tool": "stock", "arguments": {"item": "apple"}},
            {"id": "plums", "tool": "stock", "arguments": {"item": "plum"}},
            {
                "id": "fruit",
                "tool": "total",
                "arguments": {
                    "items": [
                        {"$ref": "steps.apples.value.item"},
                        {"$ref": "steps.plums.value.item"},
                    ]
                },
            },
        ],
        "reasoner": {
            "name": "tool-results",
            "min_supports": 1,
            "params": {
                "claims": [
                    {
                        "statement": "There are {count} apples on shelf {shelf}.",
                        "cite": {
                            "count": "steps.apples.value.count",
                            "shelf": "steps.apples.value.shelf",
                        },
                    },
                    {"statement": "{total} fruit in all.", "cite": {"total": "steps.fruit.value"}},
                ]
            },
        },
        "seed": 1,
    }
    spec.update(overrides)
    return spec


def run(
    root: Path,
    spec: dict[str, Any] | RunSpec,
    toolset: Toolset,
    handlers: dict[str, StepHandler] | None = None,
    registries: RunRegistries | None = None,
) -> RunOutcome:
    model = spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)
    return asyncio.run(
        execute_run(model, root=root, toolset=toolset, handlers=handlers, registries=registries)
    )


def remanifest(run_dir: Path) -> Path:
    """Rewrite the manifest after tampering (an attacker who also forges the manifest)."""
    (run_dir / MANIFEST_FILE).unlink()
    manifest = build_manifest(run_dir)
    (run_dir / MANIFEST_FILE).write_bytes(canonical_json(manifest.to_json()))
    target = run_dir.parent / manifest.run_id
    if target != run_dir:
        os.rename(run_dir, target)
    return target


def trace_events(run_dir: Path) -> list[dict[str, Any]]:
    """The run's trace.jsonl, one parsed event a line, in order."""
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()]


def rechain(run_dir: Path, mutate: Callable[[list[dict[str, Any]]], None]) -> Path:
    """Edit the trace's events in place, then forge a consistent chain and manifest."""
    events = trace_events(run_dir)
    mutate(events)
    prev, lines = None, []
    for idx, event in enumerate(events):
        event["idx"], event["prev"] = idx, prev
        line = canonical_json(event)
        prev = digest(line)
        lines.append(line + b"\n")
    (run_dir / "trace.jsonl").write_bytes(b"".join(lines))
    return remanifest(run_dir)


def copy_run(run_dir: Path, dest_root: Path) -> Path:
    target = dest_root / "runs" / run_dir.name
    shutil.copytree(run_dir, target)
    return target


def run_files(run_dir: Path) -> list[str]:
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
