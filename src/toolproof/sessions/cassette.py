"""A recorded run served as a cassette to an application's own tests.

``Cassette(path, mode)`` reads a run directory (its manifest verified first: a
tampered run is refused) — a run of ``toolproof run``, a ``serve --record`` session
or an agent session of ``record_session`` — and indexes every recorded tool call by
tool name and the canonical JSON (RFC 8785) of its arguments, keeping repeated
identical calls **in recorded order**: the first such call is served the first
recorded result, the second the second. A session's calls and model turns count in
the order they were asked (their admission numbers, ``call-0000000N``,
``turn-0000000N``), so two identical requests in flight at once that were answered
out of order are still each served their own. :meth:`Cassette.toolset` builds a Toolset
whose tools answer from the record; the application under test uses it like the
real one.

The record modes (``none``, ``once``, ``new_episodes``: VCR's vocabulary), serving an
agent session whole (``toolproof.Session.from_cassette``) and recording are described in
:mod:`toolproof.testing.cassette`. Calls and turns are served through the one replay
matcher (:mod:`toolproof.runs.matcher`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal, get_args

from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.manifest import check_manifest
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.tools import PresentedTools, ToolResult, ToolSpec
from toolproof.contract.trace import EvidenceRegistered, ModelTurn, ToolCalled, ToolReturned
from toolproof.errors import InputError, ToolCallError
from toolproof.identity import canonical_json
from toolproof.runs.finalize import finalize_session
from toolproof.runs.live import LiveRecording, admission_number, admission_sorted, open_recording
from toolproof.runs.matcher import Matcher, call_text, diff
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import exchange_key, key_text, stream_evidence
from toolproof.sessions.port import RecordedTurn
from toolproof.sessions.presented import present, recorded_specs
from toolproof.tools.observe import Observed, observe
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset
from toolproof.verify.view import RunView

__all__ = ["RECORD_MODES", "Cassette", "RecordMode", "ServedTurn"]

RecordMode = Literal["none", "once", "new_episodes"]
"""A cassette's record mode (VCR's names; see the module docstring)."""
RECORD_MODES: tuple[str, ...] = get_args(RecordMode)
"""The record modes, in the order the docs list them."""


ServedTurn = RecordedTurn
"""A recorded model turn as a cassette serves it (its ``response`` bytes and ``detail``)."""

CallKey = tuple[str, bytes]
"""A tool call's match key: (tool, canonical arguments)."""


def _key(tool: str, arguments: Any) -> CallKey:
    return tool, canonical_json(arguments)


def _call_shown(key: CallKey) -> str:
    return call_text(*key)


def _turn_shown(key: tuple[str, bytes]) -> str:
    return key_text(key[1])


class Cassette:
    """Recorded tool results of one run, served by tool, canonical arguments and occurrence.

    Args:
        path: a run directory (``<root>/runs/run_<hex>``, or any directory a cassette
            was saved to). With ``mode="once"`` or ``"new_episodes"`` it may not exist
            yet: the cassette is recorded there.
        mode: ``"none"`` (serve only; a miss fails closed), ``"once"`` or
            ``"new_episodes"`` (see the module docstring).
        task: the task of a run the cassette records (default ``"cassette <name>"``).

    Attributes:
        path: the cassette's directory.
        mode: its record mode.
        recording: whether a call it cannot serve runs the real tool and is recorded.
        calls: the recorded calls, ``(tool, arguments)`` in recorded order.
        served: calls answered from the record or an override.
        recorded_calls: calls run live and recorded in this cassette's lifetime.
        misses: one message per call that failed closed.

    Raises:
        InputError: ``mode`` is not a record mode; ``path`` does not exist in mode
            ``none``; the run's manifest does not verify, or its trace does not parse.

    """

    def __init__(self, path: str | Path, mode: str = "none", *, task: str | None = None) -> None:
        path = Path(path)
        if mode not in RECORD_MODES:
            raise InputError(
                f"cassette {path}: record mode {mode!r} is not one of " + ", ".join(RECORD_MODES),
                rule="record mode",
            )
        exists = path.exists()
        if not exists and mode == "none":
            raise InputError(
                f"cassette {path}: no such run directory (record mode 'none' only serves "
                "a recorded run; mode 'once' records it)",
                path=str(path),
            )
        self.path = path
        self.run_dir = path
        self.mode = mode
        self.task = task or f"cassette {path.name}"
        self.recording = mode == "new_episodes" or (mode == "once" and not exists)
        self.recorded: Matcher[CallKey, ToolResult] = Matcher()
        """The recorded results by (tool, canonical arguments), in the order asked."""
        self.calls: list[tuple[str, Any]] = []
        self.turns: Matcher[tuple[str, bytes], ServedTurn] = Matcher()
        """The recorded model turns by (source, match key), in the order asked."""
        self._episodes: list[tuple[str, tuple[str, Any, ToolResult] | ModelExchange]] = []
        """Every recorded call and turn with its step id, in trace order (to re-record)."""
        self.recorded_names: list[str] = []
        self.presented: PresentedTools | None = None  # runtime.json's, if the run has it
        if exists:
            self._load(path)
        self.overrides: dict[tuple[str, bytes], ToolResult] = {}
        self.misses: list[str] = []
        self.served = 0
        self.recorded_calls = 0
        self.recorded_turns = 0
        self._live: LiveRecording | None = None
        self._base: Toolset | None = None

    def _load(self, run_dir: Path) -> None:
        manifest, digests, findings = check_manifest(run_dir)
        if findings or manifest is None:
            reason = findings[0].message if findings else "no manifest"
            raise InputError(f"cassette {run_dir}: the run does not verify: {reason}")
        view = RunView(run_dir, digests, {entry.path: entry.size for entry in manifest.files})
        if view.events is None or view.runtime is None:
            raise InputError(f"cassette {run_dir}: the trace or runtime does not parse")
        self.recorded_names = sorted({tool.name for tool in view.runtime.toolset.tools})
        self.presented = view.runtime.presented
        pending: dict[str, ToolCalled] = {}
        registered: dict[tuple[str, str], EvidenceRecord] = {}
        results: list[tuple[CallKey, int, ToolResult, str]] = []
        turns: list[tuple[tuple[str, bytes], int, ServedTurn, str]] = []
        for event in view.events:
            if isinstance(event, ToolCalled):
                pending[event.call_id] = event
            elif isinstance(event, ToolReturned) and event.call_id in pending:
                called = pending.pop(event.call_id)
                call, step = called.call, called.step
                arguments = dict(call.arguments)
                results.append((_key(call.tool, arguments), called.idx, event.result, step))
                self.calls.append((call.tool, arguments))
                self._episodes.append((step, (call.tool, arguments, event.result)))
            elif isinstance(event, EvidenceRegistered):
                registered[(event.step, event.evidence.id)] = event.evidence
            elif isinstance(event, ModelTurn):
                request = registered[(event.step, event.request)]
                response = registered[(event.step, event.response)]
                self._load_turn(view.evidence, event, request, response, turns)
        # repeated identical calls and turns are served in the order they were asked
        self.recorded = Matcher(results, asked_order=admission_sorted)
        self.turns = Matcher(turns, asked_order=admission_sorted)

    def _load_turn(
        self,
        evidence: RunEvidence,
        event: ModelTurn,
        request: EvidenceRecord,
        response: EvidenceRecord,
        turns: list[tuple[tuple[str, bytes], int, ServedTurn, str]],
    ) -> None:
        asked = evidence.read(request.id)  # the manifest vouches for the bytes
        answered = evidence.read(response.id)
        detail = dict(event.detail)
        key = (event.source, exchange_key(event.source, asked, detail))
        stream_id = stream_evidence(detail)
        stream = None if stream_id is None else evidence.read(stream_id)
        turns.append((key, event.idx, ServedTurn(answered, detail, stream=stream), event.step))
        exchange = ModelExchange(
            source=event.source,
            model=event.model,
            request=asked,
            response=answered,
            key=event.key,
            request_media_type=request.media_type,
            response_media_type=response.media_type,
            detail=detail,
            stream=stream,
        )
        self._episodes.append((event.step, exchange))

    def override(self, tool: str, arguments: dict[str, Any], result: Any) -> None:
        """Answer every ``tool(arguments)`` call with ``result`` (a :class:`ToolResult` or JSON).

        An override wins over the record and is not used up.
        """
        value = result if isinstance(result, ToolResult) else ToolResult.success(result)
        self.overrides[_key(tool, arguments)] = value

    def nearest(self, tool: str, arguments: dict[str, Any]) -> str:
        """The nearest recorded call to ``tool(arguments)``: a unified diff, recorded -> asked."""
        nearest = self.recorded.nearest(_key(tool, arguments), _call_shown, lambda k: k[0] == tool)
        if nearest is None:
            return "(the run recorded no tool calls)"
        return diff(_call_shown(nearest), call_text(tool, canonical_json(arguments)))

    def _take(self, tool: str, arguments: dict[str, Any]) -> ToolResult | None:
        key = _key(tool, arguments)
        found = self.overrides.get(key)
        if found is None:
            found = self.recorded.take(key)
            if found is None:
                return None
        self.served += 1
        return found

    def _miss(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        key = _key(tool, arguments)
        asked = f"{tool}({key[1].decode()})"
        times = self.recorded.recorded(key)
        if times:
            message = (
                f"cassette {self.path.name}: {asked} was recorded {times} "
                f"time{'s' if times > 1 else ''}, and this is call {times + 1} of it "
                f"(repeated calls are served in recorded order, each once; record mode "
                f"{self.mode!r})"
            )
        else:
            message = (
                f"cassette {self.path.name}: no recorded call {asked} (record mode "
                f"{self.mode!r}); nearest recorded call:\n" + self.nearest(tool, arguments)
            )
        self.misses.append(message)
        return ToolResult.fail("cassette_miss", message, where="runtime")

    def lookup(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Serve ``tool(arguments)`` from the override or the next unserved recorded result.

        Repeated identical calls take the recorded results in order; one call more than
        recorded is a miss. Never runs a tool, whatever the mode.

        Returns:
            The result; on a miss, a ``cassette_miss`` failure naming the call (with the
            nearest recorded call's diff when it was never recorded), also appended to
            :attr:`misses`.

        """
        found = self._take(tool, arguments)
        return found if found is not None else self._miss(tool, arguments)

    def _open(self, base: Toolset) -> LiveRecording:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(
            tempfile.mkdtemp(prefix=f".{self.path.name}.recording-", dir=self.path.parent)
        )
        presented = present(tool.spec for tool in base.exposed())  # it replays with no Toolset
        live = open_recording(scratch, base, task=self.task, presented=presented)
        # the recorded episodes, kept in their order; a session's keep their step ids
        # (their admission numbers), so the saved run serves them as this one does
        numbered = all(admission_number(step) is not None for step, _ in self._episodes)
        admitted = live.admitted
        for step, episode in self._episodes:
            number = admission_number(step) or 0
            if isinstance(episode, ModelExchange):
                live.record_turn(episode, step if numbered else "")
                live.turns_admitted = max(live.turns_admitted, number)
            else:
                tool, arguments, result = episode
                admission = live.admit(tool, arguments)
                if numbered:  # its recorded step: the call's id and encoding follow it
                    admission = admission._replace(step=step, recorded_id="")
                live.record(admission, Observed(result))
                admitted = max(admitted, number if numbered else live.admitted)
        live.admitted = admitted  # new calls and turns are numbered after the recorded ones
        return live

    async def _record(self, base: Toolset, tool: str, arguments: dict[str, Any]) -> ToolResult:
        if self._live is None:
            self._live = self._open(base)
        try:
            admission = self._live.admit(tool, arguments)
        except ToolCallError as refused:
            return ToolResult(ok=False, failure=refused.failure)
        key = admission.idempotency_key or None
        observed = await observe(base[tool].call(arguments), idempotency_key=key)
        try:
            recorded = self._live.record(admission, observed)
        except ToolCallError as unrecorded:
            return ToolResult(ok=False, failure=unrecorded.failure)
        self.recorded_calls += 1
        return recorded.result

    def tool(self, spec: ToolSpec, base: Toolset | None = None) -> Tool:
        """A tool with ``spec`` answering from the record (recording into it when it records).

        Args:
            spec: the spec the application sees.
            base: the real Toolset whose tool ``spec.name`` runs for a call the cassette
                cannot serve, when :attr:`recording`; ``None``: such a call is a miss.

        """
        name = spec.name

        async def body(arguments: dict[str, Any]) -> ToolResult:
            found = self._take(name, arguments)
            if found is not None:
                return found
            if self.recording and base is not None:
                return await self._record(base, name, arguments)
            return self._miss(name, arguments)

        return Tool(spec, body, source=f"cassette:{self.path.name}")

    def toolset(self, base: Toolset | None = None) -> Toolset:
        """A sealed Toolset answering from the record.

        Args:
            base: the application's real Toolset; the specs (schemas) of its exposed
                tools are kept (:meth:`Toolset.exposed`: an ``approve``-gated tool's ungated
                siblings are left out, as every outward face leaves them out), and their
                bodies run only for a call a recording cassette cannot serve.
                Without it, the tools as the run stores them presented (:attr:`presented`);
                a run that stores none: one permissive tool per recorded name.

        Raises:
            InputError: the cassette records (mode ``once`` with no cassette yet, or
                ``new_episodes``) and ``base`` is ``None``: recording needs the real tools.

        """
        if self.recording and base is None:
            raise InputError(
                f"cassette {self.path}: record mode {self.mode!r} records calls, which needs "
                "the real Toolset: cassette.toolset(real_toolset)",
                rule="record mode",
            )
        self._base = base if base is not None else self._base
        toolset = Toolset()
        if base is not None:  # what the outward faces expose: no path around an approve gate
            for exposed in base.exposed():
                toolset.add(self.tool(exposed.spec, base))
        else:  # as the run stores them presented, or one permissive tool per recorded name
            for spec in recorded_specs(self.presented, self.recorded_names):
                toolset.add(self.tool(spec))
        return toolset.seal()

    @property
    def frozen(self) -> bool:
        """Whether model turns are served from the record (no model is asked).

        ``False`` while the cassette records (mode ``once`` with no cassette yet, or
        ``new_episodes``): then every model turn is asked of the live model and recorded.
        """
        return not self.recording

    def serve_turn(self, source: str, key: bytes) -> ServedTurn:
        """The next unserved recorded turn of ``source`` with match key ``key``.

        Repeated identical requests take the recorded responses in order. What a session's
        model recorders (``session.pydantic_ai_model``, ``httpx_transport``...) call when
        :attr:`frozen`.

        Args:
            source: ``pydantic-ai``, ``openai-agents`` or ``http``.
            key: the asked request's match key (:func:`toolproof.runs.turns.turn_key`).

        Raises:
            InputError: a miss (fails closed; rule ``cassette miss``): no turn with that
                key was recorded (the message has a unified diff of the nearest recorded
                request's key and the asked one), or every recorded one was served. The
                message is also appended to :attr:`misses`.

        """
        found = self.known_turn(source, key)
        if found is not None:
            return found
        entry = (source, key)
        times = self.turns.recorded(entry)
        if times:
            message = (
                f"cassette {self.path.name}: this {source} model request was recorded {times} "
                f"time{'s' if times > 1 else ''}, and this is request {times + 1} of it "
                f"(record mode {self.mode!r})"
            )
        else:
            nearest = self.turns.nearest(entry, _turn_shown, lambda k: k[0] == source)
            recorded = _turn_shown(nearest) if nearest is not None and nearest[0] == source else ""
            message = (
                f"cassette {self.path.name}: no recorded {source} model request like this one "
                f"(record mode {self.mode!r}); nearest recorded request:\n"
                + diff(recorded, key_text(key))
            )
        self.misses.append(message)
        raise InputError(message, rule="cassette miss")

    def known_turn(self, source: str, key: bytes) -> ServedTurn | None:
        """The next unserved recorded turn of ``source`` with match key ``key``, or ``None``.

        Repeated identical requests take the recorded responses in the order they were
        asked. What a session's model recorders get while the cassette records (mode
        ``new_episodes``): a known turn is served from the cassette, and only ``None``
        (a new episode) sends the request to the live model. Counts in
        :attr:`served_turns`; ``None`` is not a miss.
        """
        return self.turns.take((source, key))

    @property
    def served_turns(self) -> int:
        """Recorded model turns served (:meth:`serve_turn`, :meth:`known_turn`)."""
        return self.turns.served

    def admit_turn(self, source: str) -> str:
        """Before a live model is asked (a recording cassette): check the turn can be recorded.

        Returns:
            The step the turn will be recorded as (numbered in the order turns are asked).

        Raises:
            InputError: the cassette does not record (it only serves).
            RecordingError: the recording cannot be written.

        """
        if not self.recording:
            raise InputError(
                f"cassette {self.path.name}: record mode {self.mode!r} asks no {source} model",
                rule="record mode",
            )
        if self._live is None:
            self._live = self._open(self._base or Toolset().seal())
        return self._live.admit_turn(source)

    def record_turn(self, turn: ModelExchange, step: str = "") -> str:
        """Record one live model turn into the cassette (after :meth:`admit_turn`).

        Args:
            turn: the exchange.
            step: what :meth:`admit_turn` returned; ``""``: numbered now.

        Returns:
            Its step id in the recording (``turn-00000001`` and up).

        Raises:
            InputError: the cassette does not record.
            RecordingError: the turn cannot be written.

        """
        if self._live is None:
            raise InputError(
                f"cassette {self.path.name}: record mode {self.mode!r} records no model turn",
                rule="record mode",
            )
        step = self._live.record_turn(turn, step)
        self.recorded_turns += 1
        return step

    async def save(self) -> str | None:
        """Write what was recorded to :attr:`path`: a new run, replacing the old one.

        In mode ``new_episodes`` the new run holds the recorded calls first (in their
        order, with their recorded results) and then the new ones, so its run id
        differs from the old one's; the directory at :attr:`path` is replaced.

        Returns:
            The new run's id, or ``None`` when nothing was recorded (the cassette on
            disk is untouched).

        Raises:
            RecordingError: the recording cannot be finalized or written.

        """
        live, self._live = self._live, None
        if live is None:
            return None
        scratch = live.root
        try:
            live.close()
            outcome = await finalize_session(live.directory, scratch)
            if self.path.exists():
                old = self.path.with_name(f".{self.path.name}.old-{os.getpid()}")
                self.path.rename(old)
                outcome.path.rename(self.path)
                shutil.rmtree(old)
            else:
                outcome.path.rename(self.path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return outcome.run_id
