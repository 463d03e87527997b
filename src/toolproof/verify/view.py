"""A read-only view of a run directory: each file parsed once, problems kept, not raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.trace import TraceLine, read_trace
from toolproof.contract.evidence import Claim
from toolproof.contract.layout import (
    CLAIMS_FILE,
    PLAN_FILE,
    RUNTIME_FILE,
    SPEC_FILE,
    TRACE_FILE,
)
from toolproof.contract.runs import ExecutionRuntime, Plan, RunSpec
from toolproof.contract.trace import TraceEvent
from toolproof.errors import InputError, validation_problem
from toolproof.identity import canonical_json

__all__ = ["RunView"]

_CLAIMS: TypeAdapter[list[Claim]] = TypeAdapter(list[Claim])


def _problem_of(exc: ValidationError) -> str:
    first = validation_problem(exc, empty="(document)")
    where = first.where
    return f"{where}: {first.message}"


class RunView:
    """The parsed files of one run directory.

    Attributes:
        directory: the run directory.
        problems: why a file could not be read as its model, by relative path.
        spec, plan, runtime: the parsed models, or ``None``.
        claims: the parsed ``claims.json``, or ``None``.
        trace: every line of ``trace.jsonl``; ``events`` is the list of events when
            every line parsed (``None`` otherwise).
        evidence: the run's evidence items, whatever its layout (the one seam every
            check reads evidence bytes through).

    Args:
        directory: the run directory.
        digests: digests already verified (by the manifest check), by relative path.
        sizes: the sizes that go with them (read from the files when not given).

    """

    def __init__(
        self,
        directory: Path,
        digests: dict[str, str] | None = None,
        sizes: dict[str, int] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.evidence = RunEvidence.open(self.directory, dict(digests or {}), dict(sizes or {}))
        self.problems: dict[str, str] = {}
        self.spec: RunSpec | None = self._model(SPEC_FILE, RunSpec)
        self.plan: Plan | None = self._model(PLAN_FILE, Plan)
        self.runtime: ExecutionRuntime | None = self._model(RUNTIME_FILE, ExecutionRuntime)
        self.claims: list[Claim] | None = self._claims()
        self.trace: list[TraceLine] = []
        self.events: list[TraceEvent] | None = None
        self._trace()

    def _read(self, rel: str) -> bytes | None:
        path = self.directory / rel
        if path.is_symlink() or not path.is_file():
            self.problems[rel] = f"{rel} is missing"
            return None
        return path.read_bytes()

    def _model(self, rel: str, cls: Any) -> Any:
        raw = self._read(rel)
        if raw is None:
            return None
        try:
            model = cls.model_validate_json(raw)
        except ValidationError as exc:
            self.problems[rel] = f"{rel} is not a valid {cls.__name__}: {_problem_of(exc)}"
            return None
        except InputError as exc:
            self.problems[rel] = f"{rel} is not a valid {cls.__name__}: {exc.message}"
            return None
        if canonical_json(model.to_json()) != raw:
            self.problems[rel] = f"{rel} is not in canonical JSON form (RFC 8785)"
            return None
        return model

    def _claims(self) -> list[Claim] | None:
        raw = self._read(CLAIMS_FILE)
        if raw is None:
            return None
        try:
            claims = _CLAIMS.validate_json(raw)
        except ValidationError as exc:
            self.problems[CLAIMS_FILE] = f"claims.json is not a list of claims: {_problem_of(exc)}"
            return None
        except InputError as exc:
            self.problems[CLAIMS_FILE] = f"claims.json is not a list of claims: {exc.message}"
            return None
        if canonical_json([claim.to_json() for claim in claims]) != raw:
            self.problems[CLAIMS_FILE] = "claims.json is not in canonical JSON form (RFC 8785)"
            return None
        return claims

    def _trace(self) -> None:
        raw = self._read(TRACE_FILE)
        if raw is None:
            return
        self.trace, problem = read_trace(raw)
        if problem is not None:
            self.problems[TRACE_FILE] = f"trace.jsonl {problem}"
        bad = [line for line in self.trace if line.event is None]
        if bad:
            self.problems.setdefault(
                TRACE_FILE, f"trace.jsonl line {bad[0].position + 1} {bad[0].problem}"
            )
        if problem is None and not bad:
            self.events = [line.event for line in self.trace if line.event is not None]
