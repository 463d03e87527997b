"""A read-only view of a run directory: each file parsed once, problems kept, not raised.

The small files (runtime, claims) are parsed when the view is built. ``spec.json`` and
``plan.json``, which hold a step and a node per call of a session, are read part by
part (:class:`~toolproof.verify.documents.ModelStream`): checked whole when the view is
built, keeping their heads (:attr:`RunView.spec_head`, :attr:`RunView.plan_head`) and
each plan node's position by a compact key (:attr:`RunView.plan_index`), and read
again by the checks that walk them (:meth:`RunView.spec_steps`,
:meth:`RunView.plan_parts`). :attr:`RunView.spec` and :attr:`RunView.plan` parse a
file whole, on first use, for callers (plugin checks, replay) that want the models.
The trace is read by :meth:`RunView.scan`: one pass over ``trace.jsonl`` in bounded
memory (:class:`~toolproof.bundle.trace.TraceReader`), each line parsed and handed to
the consumers, then dropped. :attr:`RunView.events` holds every event in memory
instead; it is read on first use, for callers (plugin checks, replay) that want the
whole list.

Limits (each refusal is a one-line problem naming the file, where and the rule):
:data:`MAX_CLAIMS` claims and :data:`MAX_CLAIMS_BYTES` bytes in ``claims.json``;
:data:`~toolproof.bundle.trace.MAX_LINE_BYTES` bytes per trace line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.trace import (
    MAX_LINE_BYTES,
    ParsedLines,
    TraceLine,
    TraceReader,
    parse_event,
)
from toolproof.contract.evidence import Claim
from toolproof.contract.layout import (
    CLAIMS_FILE,
    PLAN_FILE,
    RUNTIME_FILE,
    SPEC_FILE,
    TRACE_FILE,
)
from toolproof.contract.runs import (
    ExecutionRuntime,
    Plan,
    PlanNode,
    RunSpec,
    StepKind,
    StepSpec,
)
from toolproof.contract.trace import TraceEvent
from toolproof.errors import InputError, validation_problem
from toolproof.identity import canonical_json, digest, hash_digest
from toolproof.verify.compact import compact_key
from toolproof.verify.documents import ModelStream

__all__ = ["MAX_CLAIMS", "MAX_CLAIMS_BYTES", "RunView"]

MAX_CLAIMS = 100_000
"""The most claims ``claims.json`` may hold; validation stops at the first one past it."""

MAX_CLAIMS_BYTES = 64 * 1024 * 1024
"""The largest ``claims.json`` read (64 MiB); a larger one is refused by its size, unread."""


@functools.cache
def _claims_adapter(limit: int) -> TypeAdapter[list[Claim]]:
    """Claims as read: at most ``limit`` of them, validation stopping at the first error."""
    return TypeAdapter(Annotated[list[Claim], Field(max_length=limit, fail_fast=True)])


@functools.cache
def _edge_adapter() -> TypeAdapter[list[str]]:
    return TypeAdapter(list[str])


LineConsumer = Callable[[TraceLine], None]
"""Called with each valid line of the trace, in order, during :meth:`RunView.scan`."""


def _problem_of(exc: ValidationError) -> str:
    first = validation_problem(exc, empty="(document)")
    where = first.where
    return f"{where}: {first.message}"


class RunView:
    """The parsed files of one run directory.

    Attributes:
        directory: the run directory.
        spec_head: ``spec.json`` without its steps (``steps`` empty), or ``None`` when
            the file is not a valid canonical spec.
        plan_head: ``plan.json`` without its nodes and edges (its ``id`` the stored
            one, checked against the content), or ``None``.
        plan_index: each plan node's position by :func:`~toolproof.verify.compact.compact_key`
            of its id (the last one when an id repeats; about 110 bytes a node), or
            ``None`` with ``plan_head``.
        plan_size: the number of plan nodes.
        plan_finalize: the positions of the plan's ``finalize`` nodes.
        runtime: the parsed model, or ``None``.
        claims: the parsed ``claims.json``, or ``None``.
        trace_ok: after a scan, whether every trace line parsed and the file ends with
            a newline (the checks that read events run only then).
        trace_size, trace_digest: after a scan, the size and SHA-256 of every byte
            of ``trace.jsonl`` the first scan read (``None`` when it is missing): the
            bytes the streaming checks judged, which verify compares with the manifest.
        evidence: the run's evidence items, whatever its layout (the one seam every
            check reads evidence bytes through).

    Args:
        directory: the run directory.
        digests: digests already verified (by the manifest check), by relative path.
        sizes: the sizes that go with them (read from the files when not given).
        max_line_bytes: the longest trace line accepted.
        max_claims: the most claims ``claims.json`` may hold.
        parsed: trace lines already parsed, by position (a finalized session's live
            trace, which its run's trace repeats line for line): a line whose SHA-256
            is the one at its position there takes that event instead of being parsed
            again (:meth:`scan`).

    """

    def __init__(
        self,
        directory: Path,
        digests: dict[str, str] | None = None,
        sizes: dict[str, int] | None = None,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_claims: int = MAX_CLAIMS,
        parsed: ParsedLines | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._parsed = parsed
        self.evidence = RunEvidence.open(self.directory, dict(digests or {}), dict(sizes or {}))
        self._problems: dict[str, str] = {}
        self.max_line_bytes = max_line_bytes
        self.max_claims = max_claims
        self.plan_index: dict[int, int] | None = None
        self.plan_size = 0
        self.plan_finalize: set[int] = set()
        self.spec_head: RunSpec | None = self._spec_head()
        self.plan_head: Plan | None = self._plan_head()
        self.runtime: ExecutionRuntime | None = self._model(RUNTIME_FILE, ExecutionRuntime)
        self.claims: list[Claim] | None = self._claims()
        self._scanned = False
        self._events: list[TraceEvent] | None = None
        self.trace_ok = False
        self.trace_size: int | None = None
        self.trace_digest: str | None = None

    def _stream(self, rel: str) -> ModelStream:
        if rel == SPEC_FILE:
            items = {"steps": StepSpec.model_validate}
            return ModelStream(
                self.directory / rel, rel, RunSpec, items, max_part_chars=self.max_line_bytes
            )
        validators: dict[str, Callable[[Any], Any]] = {
            "nodes": PlanNode.model_validate,
            "edges": _edge_adapter().validate_python,
        }
        return ModelStream(
            self.directory / rel,
            rel,
            Plan,
            validators,
            max_part_chars=self.max_line_bytes,
            id_kind="plan",
        )

    def _present(self, rel: str) -> bool:
        path = self.directory / rel
        if path.is_symlink() or not path.is_file():
            self._problems[rel] = f"{rel} is missing"
            return False
        return True

    def _spec_head(self) -> RunSpec | None:
        if not self._present(SPEC_FILE):
            return None
        stream = self._stream(SPEC_FILE)
        for _ in stream.read():
            pass
        if stream.problem is not None:
            self._problems[SPEC_FILE] = stream.problem
        return stream.head  # type: ignore[no-any-return]

    def _plan_head(self) -> Plan | None:
        if not self._present(PLAN_FILE):
            return None
        stream = self._stream(PLAN_FILE)
        index: dict[int, int] = {}
        for name, position, node in stream.read():
            if name == "nodes":
                index[compact_key(node.id)] = position
                if node.kind == StepKind.FINALIZE:
                    self.plan_finalize.add(position)
                self.plan_size = position + 1
        if stream.problem is not None:
            self._problems[PLAN_FILE] = stream.problem
            self.plan_finalize.clear()
            return None
        self.plan_index = index
        return stream.head  # type: ignore[no-any-return]

    def spec_steps(self) -> Iterator[StepSpec]:
        """The spec's steps, read again from ``spec.json`` one at a time (when it is valid).

        Raises:
            OSError: the file cannot be read.

        """
        if self.spec_head is None:
            return
        for _, _, step in self._stream(SPEC_FILE).read():
            yield step

    def plan_parts(self) -> Iterator[tuple[str, int, PlanNode | list[str]]]:
        """The plan's edges, then its nodes, read again one at a time (when it is valid).

        Yields ``("edges", position, [from, to])`` and ``("nodes", position, node)`` in
        file order (canonical: the edges first).

        Raises:
            OSError: the file cannot be read.

        """
        if self.plan_head is None:
            return
        yield from self._stream(PLAN_FILE).read()

    @functools.cached_property
    def spec(self) -> RunSpec | None:
        """``spec.json`` parsed whole, on first use (``None`` when it is not valid)."""
        return self._model(SPEC_FILE, RunSpec) if self.spec_head is not None else None

    @functools.cached_property
    def plan(self) -> Plan | None:
        """``plan.json`` parsed whole, on first use (``None`` when it is not valid)."""
        return self._model(PLAN_FILE, Plan) if self.plan_head is not None else None

    @functools.cached_property
    def plan_order(self) -> dict[str, int] | None:
        """Each plan node's position by id (the last one when an id repeats), or ``None``.

        One table for the checks that need it (``trace-chain``, ``required-steps``).
        """
        if self.plan is None:
            return None
        return {node.id: index for index, node in enumerate(self.plan.nodes)}

    @property
    def problems(self) -> dict[str, str]:
        """Why a file could not be read as its model, by relative path (scans the trace)."""
        if not self._scanned:
            self._collect()
        return self._problems

    @property
    def events(self) -> list[TraceEvent] | None:
        """Every event of the trace, in memory, when every line parsed (``None`` otherwise).

        Read on first use (a second pass when :meth:`scan` already ran); memory grows
        with the trace. Checks that stream take their events from :meth:`scan` instead.
        """
        if self._events is None and (not self._scanned or self.trace_ok):
            self._collect()
        return self._events

    def _collect(self) -> None:
        events: list[TraceEvent] = []
        self.scan([lambda line: events.append(line.event)])  # type: ignore[arg-type]
        self._events = events if self.trace_ok else None

    def _read(self, rel: str, limit: int | None = None) -> bytes | None:
        path = self.directory / rel
        if path.is_symlink() or not path.is_file():
            self._problems[rel] = f"{rel} is missing"
            return None
        if limit is not None and (size := path.stat().st_size) > limit:
            self._problems[rel] = (
                f"{rel} is {size} bytes, over the limit of {limit} bytes; refused by its "
                "size, not read"
            )
            return None
        return path.read_bytes()

    def _model(self, rel: str, cls: Any) -> Any:
        raw = self._read(rel)
        if raw is None:
            return None
        try:
            model = cls.model_validate_json(raw)
        except ValidationError as exc:
            self._problems[rel] = f"{rel} is not a valid {cls.__name__}: {_problem_of(exc)}"
            return None
        except InputError as exc:
            self._problems[rel] = f"{rel} is not a valid {cls.__name__}: {exc.message}"
            return None
        if canonical_json(model.to_json()) != raw:
            self._problems[rel] = f"{rel} is not in canonical JSON form (RFC 8785)"
            return None
        return model

    def _claims(self) -> list[Claim] | None:
        raw = self._read(CLAIMS_FILE, MAX_CLAIMS_BYTES)
        if raw is None:
            return None
        try:
            claims = _claims_adapter(self.max_claims).validate_json(raw)
        except ValidationError as exc:
            if exc.errors()[0]["type"] == "too_long":
                limit = self.max_claims
                self._problems[CLAIMS_FILE] = (
                    f"claims.json holds more than {limit} claims (entry {limit} is past the "
                    "limit); refused at that entry"
                )
                return None
            self._problems[CLAIMS_FILE] = f"claims.json is not a list of claims: {_problem_of(exc)}"
            return None
        except InputError as exc:
            self._problems[CLAIMS_FILE] = f"claims.json is not a list of claims: {exc.message}"
            return None
        if canonical_json([claim.to_json() for claim in claims]) != raw:
            self._problems[CLAIMS_FILE] = "claims.json is not in canonical JSON form (RFC 8785)"
            return None
        return claims

    def scan(
        self,
        consumers: Sequence[LineConsumer] = (),
        *,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Read ``trace.jsonl`` once, in order, handing each valid line to ``consumers``.

        Memory is bounded by one read block and the longest line
        (:attr:`max_line_bytes`): a line is parsed, handed on and dropped. After the
        first line that is not a valid canonical event, nothing more is parsed (the
        rest is still read, for :attr:`trace_digest`), and :attr:`trace_ok` is False.
        A line whose bytes hash to those of the same position in the view's ``parsed``
        lines takes that line's event (the same bytes parse the same) instead of
        being parsed again.
        The trace's problem, if any, goes into :attr:`problems` (naming the line and
        its byte offset, or the missing final newline).

        Args:
            consumers: called with each valid :class:`TraceLine`, in order.
            progress: called with the number of bytes of each block read.

        Raises:
            OSError: the trace cannot be read.

        """
        self._scanned = True
        self._problems.pop(TRACE_FILE, None)
        path = self.directory / TRACE_FILE
        if path.is_symlink() or not path.is_file():
            self._problems[TRACE_FILE] = f"{TRACE_FILE} is missing"
            self.trace_ok = False
            return
        reader = TraceReader(path, max_line_bytes=self.max_line_bytes, progress=progress)
        bad: str | None = None
        last_offset = 0
        parsed = self._parsed
        for raw in reader.lines():
            last_offset = raw.offset
            if bad is not None:
                continue  # read on: every byte goes into the digest
            where = f"trace.jsonl line {raw.position + 1} (byte offset {raw.offset})"
            if raw.data is None:
                bad = (
                    f"{where} is longer than {self.max_line_bytes} bytes, the limit on a "
                    "trace line; refused unread"
                )
                continue
            line_digest = digest(raw.data)
            event = parsed.event(raw.position, line_digest) if parsed is not None else None
            problem = None
            if event is None:
                event, problem = parse_event(raw.data)
            if problem is not None:
                bad = f"{where} {problem}"
                continue
            line = TraceLine(raw.position, line_digest, event, None, raw.offset)
            for consume in consumers:
                consume(line)
        if self.trace_digest is None:  # the first pass's: what the streaming checks read
            self.trace_size, self.trace_digest = reader.size, hash_digest(reader.sha)
        if not reader.ends_with_newline:
            self._problems[TRACE_FILE] = (
                f"trace.jsonl does not end with a newline (truncated?): its last line starts "
                f"at byte offset {last_offset}"
            )
        elif bad is not None:
            self._problems[TRACE_FILE] = bad
        self.trace_ok = TRACE_FILE not in self._problems
