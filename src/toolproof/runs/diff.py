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
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.bundle.manifest import MAX_MANIFEST_BYTES, check_manifest
from toolproof.bundle.trace import READ_BLOCK_BYTES, TraceReader
from toolproof.contract.layout import MANIFEST_FILE, PLAN_FILE, RUNTIME_FILE, SPEC_FILE, TRACE_FILE
from toolproof.contract.runs import MODEL_PROVIDER_KIND, ExecutionRuntime, Manifest
from toolproof.errors import InputError, VerificationError
from toolproof.runs.turns import TURN_PROVIDER_ORIGIN, turn_provider_name

__all__ = [
    "FORK_SESSION_FIELDS",
    "RunDiff",
    "diff_runs",
    "first_trace_difference",
    "first_trace_file_difference",
    "shared_file_prefix",
    "shared_prefix",
    "varying_sources",
]


def _fields(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _pieces(data: bytes) -> Iterator[bytes]:
    """The pieces ``data.split(b"<newline>")`` gives, one at a time."""
    start = 0
    while (end := data.find(b"\n", start)) >= 0:
        yield data[start:end]
        start = end + 1
    yield data[start:]


def _file_pieces(path: Path) -> Iterator[bytes]:
    """A trace file's pieces as :func:`_pieces` gives its bytes', read once in blocks.

    Memory is one block plus one line (at most
    :data:`~toolproof.bundle.trace.MAX_LINE_BYTES`), never the file.

    Raises:
        InputError: a line is longer than the limit on a trace line (named by file, line
            and byte offset; it is not compared).
        OSError: the file cannot be read.

    """
    reader = TraceReader(path)
    for line in reader.lines():
        if line.data is None:
            raise InputError(
                f"{path.name} line {line.position + 1} (byte offset {line.offset}) is longer "
                f"than {reader.max_line_bytes} bytes, the limit on a trace line; not compared",
                path=str(path),
            )
        yield line.data
    if reader.ends_with_newline:
        yield b""


def _first_difference(pieces_a: Iterator[bytes], pieces_b: Iterator[bytes]) -> dict[str, Any]:
    for idx, (line_a, line_b) in enumerate(zip_longest(pieces_a, pieces_b)):
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
    raise AssertionError("unequal traces differ on some line")  # pragma: no cover


def first_trace_difference(a: bytes, b: bytes) -> dict[str, Any] | None:
    """The first event where two ``trace.jsonl`` contents differ, and why; ``None`` if equal.

    Returns:
        ``{"idx", "why", "fields", "a_type", "b_type"}``: ``fields`` lists the top-level
        fields whose values differ; ``why`` says it in words (one trace ending early
        included).

    """
    if a == b:
        return None
    return _first_difference(_pieces(a), _pieces(b))


def _same_file(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (compared 1 MiB at a time)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as file_a, b.open("rb") as file_b:
        while block := file_a.read(READ_BLOCK_BYTES):
            if block != file_b.read(READ_BLOCK_BYTES):
                return False
    return True


def first_trace_file_difference(a: Path, b: Path) -> dict[str, Any] | None:
    """:func:`first_trace_difference` of two trace files, read once each, side by side.

    Memory is a block and a line of each file, however long the traces (issue 31: a
    diff of two million-call runs reads them in step, never whole).

    Raises:
        InputError: a line before the difference is longer than
            :data:`~toolproof.bundle.trace.MAX_LINE_BYTES` (named by file, line and byte
            offset).
        OSError: a file cannot be read.

    """
    if _same_file(a, b):
        return None
    return _first_difference(_file_pieces(a), _file_pieces(b))


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


def _source_of(trace: Path, idx: int, varying: dict[str, list[str]]) -> str | None:
    """The varying source event ``idx`` of ``trace`` comes from, if any.

    At most three passes over the trace (the event, its model turn, its call), each a
    line at a time: never the whole trace.
    """
    event: dict[str, Any] = {}
    for at, piece in enumerate(_file_pieces(trace)):
        if at == idx:
            event = _fields(piece)
            break
    if not event:
        return None
    turn = _turn_of(trace, event)
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
    needle = f'"call_id":{json.dumps(call_id)}'.encode()
    for at, piece in enumerate(_file_pieces(trace)):
        if at >= idx:
            break
        if needle not in piece:
            continue  # not parsed: most lines are other calls'
        called = _fields(piece)
        if called.get("type") == "tool_called" and called.get("call_id") == call_id:
            tool = f"tool {called.get('call', {}).get('tool')}"
            return tool if tool in varying else None
    return None


def _turn_of(trace: Path, event: dict[str, Any]) -> dict[str, Any] | None:
    """The ``model_turn`` event of the model step ``event`` belongs to, if it does."""
    step = str(event.get("step", ""))
    if event.get("type") == "model_turn":
        return event
    if not step.startswith("turn-"):
        return None
    needle = f'"step":{json.dumps(step)}'.encode()
    for piece in _file_pieces(trace):
        if needle not in piece:
            continue
        other = _fields(piece)
        if other.get("type") == "model_turn" and other.get("step") == step:
            return other
    return None


def _manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST_FILE
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise InputError(
                f"{directory}: manifest.json is {size} bytes, over the limit of "
                f"{MAX_MANIFEST_BYTES} bytes; refused by its size, not read",
                path=str(path),
            )
        return Manifest.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise InputError(
            f"{directory}: manifest.json is missing or invalid ({type(exc).__name__}); "
            "run `toolproof verify` on it",
            path=str(directory),
        ) from None


def _checked(directory: Path) -> None:
    """Refuse a run whose files are not the ones its manifest lists (as ``verify`` would).

    Raises:
        VerificationError: the first finding of
            :func:`~toolproof.bundle.manifest.check_manifest`, naming the file and the rule.

    """
    if not (directory / MANIFEST_FILE).is_file():
        _manifest(directory)  # missing: the InputError it has always been
    _, _, findings = check_manifest(directory)
    if findings:
        first = findings[0]
        raise VerificationError(
            f"{directory}: [manifest] {first.file}: {first.message}; a run whose files do "
            "not match its manifest is not compared (run `toolproof verify` on it)",
            path=str(directory),
            file=first.file,
            check="manifest",
        )


def diff_runs(a: Path, b: Path) -> RunDiff:
    """Compare two run directories by their manifests and traces.

    Each run's files are first checked against its manifest (sizes, then digests,
    streamed: :func:`~toolproof.bundle.manifest.check_manifest`), so equal manifests
    mean equal bytes and a tampered run is never called identical to its original.

    Bounded memory whatever the runs' size: the manifests (at most
    :data:`~toolproof.bundle.manifest.MAX_MANIFEST_BYTES` each) and runtimes are read
    whole; the traces are read side by side a line at a time up to their first
    difference, and again (a line at a time) to find the source it comes from and the
    fork's shared prefix.

    Raises:
        InputError: a manifest is missing, invalid or over its size limit; a trace line
            read is longer than :data:`~toolproof.bundle.trace.MAX_LINE_BYTES`.
        VerificationError: a run's files do not match its manifest (a file truncated,
            replaced, missing or added), named with the rule it breaks.

    """
    _checked(a)
    _checked(b)
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
        first = first_trace_file_difference(a / TRACE_FILE, b / TRACE_FILE)
        if first is not None:
            source = _source_of(a / TRACE_FILE, first["idx"], varying)
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


def _shared(pieces_a: Iterator[bytes], pieces_b: Iterator[bytes]) -> int:
    shared = 0
    for line_a, line_b in zip(pieces_a, pieces_b, strict=False):
        fields_a, fields_b = _fields(line_a), _fields(line_b)
        for name in FORK_SESSION_FIELDS:
            fields_a.pop(name, None)
            fields_b.pop(name, None)
        if not fields_a or fields_a != fields_b:
            break
        shared += 1
    return shared


def shared_prefix(a: bytes, b: bytes) -> int:
    """How many leading events of two traces are equal but for :data:`FORK_SESSION_FIELDS`."""
    return _shared(_pieces(a), _pieces(b))


def shared_file_prefix(a: Path, b: Path) -> int:
    """:func:`shared_prefix` of two trace files, read once each, a line at a time.

    Raises:
        InputError: a line of the prefix is longer than
            :data:`~toolproof.bundle.trace.MAX_LINE_BYTES` (named by file, line and offset).
        OSError: a file cannot be read.

    """
    return _shared(_file_pieces(a), _file_pieces(b))


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
            shared = shared_file_prefix(parent / TRACE_FILE, child / TRACE_FILE)
            return {
                "parent": parent_id,
                "child": child_id,
                "event": forked.event,
                "reason": forked.reason,
                "shared": shared,
            }
    return None
