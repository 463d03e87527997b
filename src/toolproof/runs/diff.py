"""Differences between two runs, and between two traces.

Two live runs of the same spec with the same runtime can differ only where a source
declared non-deterministic varies: a tool with ``deterministic=False`` (and its
``varies``, e.g. ``clock``), a reasoner with ``deterministic = False``, or the model of
an agent session (``model <source> <model>``, varies: ``model``). The diff
lists these sources (:attr:`RunDiff.varying`) and says whether the first trace
difference comes from one of them (:attr:`RunDiff.explained`), so a clock reading
that changed is reported as variation, not as corruption.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.contract.layout import MANIFEST_FILE, PLAN_FILE, RUNTIME_FILE, SPEC_FILE, TRACE_FILE
from toolproof.contract.runs import MODEL_PROVIDER_KIND, ExecutionRuntime, Manifest
from toolproof.errors import InputError
from toolproof.runs.turns import TURN_PROVIDER_ORIGIN, turn_provider_name

__all__ = [
    "FORK_SESSION_FIELDS",
    "RunDiff",
    "diff_runs",
    "first_trace_difference",
    "shared_prefix",
    "varying_sources",
]


def _fields(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def first_trace_difference(a: bytes, b: bytes) -> dict[str, Any] | None:
    """The first event where two ``trace.jsonl`` contents differ, and why; ``None`` if equal.

    Returns:
        ``{"idx", "why", "fields", "a_type", "b_type"}``: ``fields`` lists the top-level
        fields whose values differ; ``why`` says it in words (one trace ending early
        included).

    """
    if a == b:
        return None
    lines_a, lines_b = a.split(b"\n"), b.split(b"\n")
    for idx in range(max(len(lines_a), len(lines_b))):
        line_a = lines_a[idx] if idx < len(lines_a) else None
        line_b = lines_b[idx] if idx < len(lines_b) else None
        if line_a == line_b:
            continue
        if line_a is None or line_b is None or not line_a or not line_b:
            shorter = "first" if not line_a else "second"
            return {
                "idx": idx,
                "why": f"the {shorter} trace ends at event {idx}",
                "fields": [],
                "a_type": _fields(line_a or b"").get("type"),
                "b_type": _fields(line_b or b"").get("type"),
            }
        fa, fb = _fields(line_a), _fields(line_b)
        keys = sorted(key for key in set(fa) | set(fb) if fa.get(key) != fb.get(key))
        changed = [key for key in keys if key != "prev"] or keys
        return {
            "idx": idx,
            "why": f"event {idx} ({fa.get('type')} vs {fb.get('type')}) differs in "
            + ", ".join(changed),
            "fields": changed,
            "a_type": fa.get("type"),
            "b_type": fb.get("type"),
        }
    return None  # pragma: no cover - unequal bytes always differ on some line


@dataclass(frozen=True)
class RunDiff:
    """How two run directories differ.

    Attributes:
        a, b: the two run ids.
        files: ``{path: "same" | "changed" | "only_a" | "only_b"}`` for every file.
        first_event: the first trace difference (see :func:`first_trace_difference`);
            ``source`` names the varying source it comes from, when it does.
        varying: the declared non-deterministic sources of either run
            (``"tool clock_now"`` -> ``["clock"]``).
        explained: the runs share spec, plan and runtime (but for the recording session
            a live run's runtime names) and their first trace difference comes from a
            varying source: variation, not corruption.
        fork: when one run is a fork of the other (its runtime's ``forked_from`` names
            the other): ``{"parent", "child", "event", "reason", "shared"}``, ``shared``
            being how many leading events of the two traces are equal but for the hash
            chain (``prev``) and the session-bound ``idempotency_key``; else ``None``.

    """

    a: str
    b: str
    files: dict[str, str] = field(default_factory=dict)
    first_event: dict[str, Any] | None = None
    varying: dict[str, list[str]] = field(default_factory=dict)
    explained: bool = False
    fork: dict[str, Any] | None = None

    @property
    def identical(self) -> bool:
        """Whether the two runs have the same run id."""
        return self.a == self.b

    def to_json(self) -> dict[str, Any]:
        """The diff as JSON."""
        return {
            "a": self.a,
            "b": self.b,
            "identical": self.identical,
            "files": self.files,
            "first_event": self.first_event,
            "varying": self.varying,
            "explained": self.explained,
            "fork": self.fork,
        }


def varying_sources(runtime: ExecutionRuntime) -> dict[str, list[str]]:
    """The sources a runtime declares non-deterministic, with what varies in each.

    Returns:
        ``{"tool <name>": varies, "reasoner <name>": varies}`` for every tool and the
        reasoner whose descriptor says ``deterministic = false``, ``{"tool <name>":
        ["model"]}`` for every model provider a reasoner called (``llm.chat``), and
        ``{"model <source> <model>": ["model"]}`` for an agent session's model (its
        recorded model turns).

    """
    out = {
        f"tool {tool.name}": list(tool.varies)
        for tool in runtime.toolset.tools
        if not tool.deterministic
    }
    for provider in runtime.providers:
        if provider.kind == MODEL_PROVIDER_KIND:
            where = "model" if provider.origin == TURN_PROVIDER_ORIGIN else "tool"
            out[f"{where} {provider.name}"] = ["model"]
    if not runtime.reasoner.deterministic:
        out[f"reasoner {runtime.reasoner.name}"] = list(runtime.reasoner.varies)
    return out


def _same_but_session(a: ExecutionRuntime | None, b: ExecutionRuntime | None) -> bool:
    """Whether two runtimes differ at most in the recording session they name.

    Every live session names its own (``session``: its stamp and pid), so two live runs
    of one agent always differ there; that is not a different input.
    """
    if a is None or b is None:
        return False
    plain_a, plain_b = a.to_json(), b.to_json()
    for plain in (plain_a, plain_b):
        plain.pop("session", None)
        plain.pop("id", None)
    return plain_a == plain_b


def _runtime(directory: Path) -> ExecutionRuntime | None:
    try:
        return ExecutionRuntime.model_validate_json((directory / RUNTIME_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def _source_of(trace: bytes, idx: int, varying: dict[str, list[str]]) -> str | None:
    """The varying source event ``idx`` of ``trace`` comes from, if any."""
    lines = trace.split(b"\n")
    if idx >= len(lines):
        return None
    event = _fields(lines[idx])
    turn = _turn_of(lines, event)
    if turn is not None:
        name = f"model {turn_provider_name(str(turn.get('source')), str(turn.get('model')))}"
        return name if name in varying else None
    call_id = event.get("call_id")
    if event.get("type") == "evidence_registered":
        call_id = (event.get("evidence") or {}).get("source", {}).get("call")
    if event.get("type") == "claim_emitted":
        reasoner = str((event.get("claim") or {}).get("reasoner", "")).split("/")[0]
        return f"reasoner {reasoner}" if f"reasoner {reasoner}" in varying else None
    if not call_id:
        return None
    for line in lines[:idx]:
        called = _fields(line)
        if called.get("type") == "tool_called" and called.get("call_id") == call_id:
            tool = f"tool {called.get('call', {}).get('tool')}"
            return tool if tool in varying else None
    return None


def _turn_of(lines: list[bytes], event: dict[str, Any]) -> dict[str, Any] | None:
    """The ``model_turn`` event of the model step ``event`` belongs to, if it does."""
    step = str(event.get("step", ""))
    if event.get("type") == "model_turn":
        return event
    if not step.startswith("turn-"):
        return None
    for line in lines:
        other = _fields(line)
        if other.get("type") == "model_turn" and other.get("step") == step:
            return other
    return None


def _manifest(directory: Path) -> Manifest:
    try:
        return Manifest.model_validate_json((directory / MANIFEST_FILE).read_bytes())
    except (OSError, ValidationError) as exc:
        raise InputError(
            f"{directory}: manifest.json is missing or invalid ({type(exc).__name__}); "
            "run `toolproof verify` on it",
            path=str(directory),
        ) from None


def diff_runs(a: Path, b: Path) -> RunDiff:
    """Compare two run directories by their manifests and traces.

    Raises:
        InputError: a manifest is missing or invalid.

    """
    ma, mb = _manifest(a), _manifest(b)
    entries_a = {entry.path: entry.digest for entry in ma.files}
    entries_b = {entry.path: entry.digest for entry in mb.files}
    files = {}
    for path in sorted(set(entries_a) | set(entries_b)):
        if path not in entries_b:
            files[path] = "only_a"
        elif path not in entries_a:
            files[path] = "only_b"
        else:
            files[path] = "same" if entries_a[path] == entries_b[path] else "changed"
    first = None
    runtime_a, runtime_b = _runtime(a), _runtime(b)
    varying = {
        **(varying_sources(runtime_a) if runtime_a else {}),
        **(varying_sources(runtime_b) if runtime_b else {}),
    }
    explained = False
    if files.get(TRACE_FILE) == "changed":
        trace_a = (a / TRACE_FILE).read_bytes()
        first = first_trace_difference(trace_a, (b / TRACE_FILE).read_bytes())
        if first is not None:
            source = _source_of(trace_a, first["idx"], varying)
            first["source"] = source
            same_inputs = all(files.get(name) == "same" for name in (SPEC_FILE, PLAN_FILE)) and (
                files.get(RUNTIME_FILE) == "same" or _same_but_session(runtime_a, runtime_b)
            )
            explained = source is not None and same_inputs
    fork = _fork(a, b, ma.run_id, mb.run_id, runtime_a, runtime_b)
    return RunDiff(ma.run_id, mb.run_id, files, first, varying, explained, fork)


FORK_SESSION_FIELDS = ("prev", "idempotency_key")
"""Trace event fields a fork's served prefix may differ in from its parent's: the hash
chain, and the idempotency key (it names the recording session)."""


def shared_prefix(a: bytes, b: bytes) -> int:
    """How many leading events of two traces are equal but for :data:`FORK_SESSION_FIELDS`."""
    shared = 0
    for line_a, line_b in zip(a.split(b"\n"), b.split(b"\n"), strict=False):
        fields_a, fields_b = _fields(line_a), _fields(line_b)
        for name in FORK_SESSION_FIELDS:
            fields_a.pop(name, None)
            fields_b.pop(name, None)
        if not fields_a or fields_a != fields_b:
            break
        shared += 1
    return shared


def _fork(
    a: Path,
    b: Path,
    id_a: str,
    id_b: str,
    runtime_a: ExecutionRuntime | None,
    runtime_b: ExecutionRuntime | None,
) -> dict[str, Any] | None:
    """The fork between two runs when one's runtime names the other as its parent."""
    for parent, child, parent_id, child_id, runtime in (
        (a, b, id_a, id_b, runtime_b),
        (b, a, id_b, id_a, runtime_a),
    ):
        forked = None if runtime is None else runtime.forked_from
        if forked is not None and forked.run == parent_id:
            shared = shared_prefix(
                (parent / TRACE_FILE).read_bytes(), (child / TRACE_FILE).read_bytes()
            )
            return {
                "parent": parent_id,
                "child": child_id,
                "event": forked.event,
                "reason": forked.reason,
                "shared": shared,
            }
    return None
