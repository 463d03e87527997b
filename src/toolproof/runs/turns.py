"""Model turns: their match keys, and the frozen ``model`` steps that serve them back.

A model turn is one request an agent's model made and the response it got, recorded by
a session's model recorder as a ``model`` step (``turn-00000001`` and up, numbered in
the order the requests were asked and written when their responses arrive; the block
is :meth:`~toolproof.runs.recorder.Recorder.model_block`). Frozen replay matches a turn
by its *match key* (:func:`turn_key`): what the model was asked, without what varies
from one call to the next or from one release of the framework to the next:

* ``pydantic-ai``: the request is ``{"messages", "model_settings", "parameters"}``,
  pydantic-ai's own objects as JSON; ``openai-agents``: every argument of
  ``Model.get_response`` but ``tracing``, as JSON. The key of both is the request's
  provider-neutral normal form (:func:`toolproof.runs.normal_form.normal_form`:
  messages, tools, settings, output), so a release that adds a defaulted field, or
  stamps messages with other times and ids, still matches;
* ``http``: the request is the body bytes; the key is ``{"method", "url", "body"}``
  with a JSON body parsed (so key order and spacing do not matter), other bodies as
  text or base64; an OpenAI-compatible chat completions body (a URL path ending with
  ``/chat/completions``: the ``openai`` SDK, LangChain's ``ChatOpenAI``) as its normal
  form (:data:`~toolproof.runs.normal_form.CHAT_COMPLETIONS`). Headers are not in it
  (they vary per call: retry counts, timeouts).

:class:`RecordedTurns` is the step handler of ``model`` steps when a run is executed
frozen (a session being finalized, ``toolproof replay``): it hands the recorded bytes
to the recorder again, so the re-executed trace is the recorded one. It serves each
step its own turn by step id, read back from the recorded trace
(:mod:`toolproof.runs.traceindex`), so identical requests are never confused there; an
agent's frozen replay (``toolproof.replay_session``) matches by key and occurrence,
counted by those admission numbers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.pack import PackContents
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.runs import MODEL_PROVIDER_KIND, PlanNode, PluginDescriptor
from toolproof.contract.trace import EvidenceRegistered, ModelTurn
from toolproof.errors import InputError, VerificationError
from toolproof.evidence.reasoners import StepOutput
from toolproof.identity import canonical_json, digest, digest_json
from toolproof.runs.executor import StepContext
from toolproof.runs.normal_form import CHAT_COMPLETIONS, normal_form
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.traceindex import TraceIndex

__all__ = [
    "TURN_PROVIDER_ORIGIN",
    "TURN_SOURCES",
    "RecordedTurns",
    "exchange_key",
    "key_text",
    "stream_evidence",
    "turn_key",
    "turn_provider_name",
    "turn_providers",
    "turn_step_id",
    "value_key",
]

_Turn = tuple[ModelTurn, EvidenceRecord, EvidenceRecord, EvidenceRecord | None]
"""A recorded turn: its event, its request's, response's and streamed bytes' evidence."""

TURN_SOURCES = ("pydantic-ai", "openai-agents", "http")
"""The recorders a model turn can come from."""
TURN_PROVIDER_ORIGIN = "agent-session"
"""The ``origin`` of the model providers a session's model turns add to its runtime."""


def turn_step_id(number: int) -> str:
    """The step id of the ``number``-th model turn of a session (from 1): ``turn-00000001``."""
    return f"turn-{number:08d}"


def turn_provider_name(source: str, model: str) -> str:
    """The provider name of a session's model: ``"<source> <model>"``."""
    return f"{source} {model}"


def turn_providers(
    turns: Sequence[ModelTurn], providers: Sequence[PluginDescriptor] = ()
) -> list[PluginDescriptor]:
    """``providers`` plus one ``model`` provider per distinct (source, model) of ``turns``.

    These declare the agent's model a source of variation (``toolproof diff`` shows
    ``varies: model``); sorted by kind and name, as ``ExecutionRuntime.providers`` is.
    A provider's ``version`` is the framework and version its turns recorded
    (``"pydantic-ai-slim 2.78.0"``), or ``"1"`` (an HTTP turn, or one recorded before
    turns named their framework).
    """
    out = list(providers)
    names = {(p.kind, p.name) for p in out}
    for turn in turns:
        name = turn_provider_name(turn.source, turn.model)
        if (MODEL_PROVIDER_KIND, name) in names:
            continue
        names.add((MODEL_PROVIDER_KIND, name))
        out.append(
            PluginDescriptor(
                kind=MODEL_PROVIDER_KIND,
                name=name,
                version=_framework(turn.detail),
                config_digest=digest_json({"source": turn.source, "model": turn.model}),
                origin=TURN_PROVIDER_ORIGIN,
            )
        )
    return sorted(out, key=lambda p: (p.kind, p.name))


def _framework(detail: Any) -> str:
    """``"<framework> <version>"`` of a turn's ``detail``, or ``"1"`` when it names none."""
    framework, version = detail.get("framework"), detail.get("version")
    if isinstance(framework, str) and isinstance(version, str):
        return f"{framework} {version}"
    return "1"


def _body(body: bytes, url: str) -> dict[str, Any]:
    if not body:
        return {"empty": True}
    try:
        parsed = json.loads(body)
    except ValueError:
        pass
    else:
        path = url.split("?", 1)[0].split("#", 1)[0]
        if isinstance(parsed, dict) and path.endswith("/chat/completions"):
            return {"chat": normal_form(CHAT_COMPLETIONS, parsed)}
        return {"json": parsed}
    try:
        return {"text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}


def turn_key(source: str, request: bytes, *, method: str = "", url: str = "") -> bytes:
    """The match key of a model turn, as canonical JSON bytes (see the module docstring).

    Args:
        source: ``pydantic-ai``, ``openai-agents`` or ``http``.
        request: the request bytes as recorded (a JSON document; ``http``: the body).
        method: ``http`` only: the request method.
        url: ``http`` only: the URL as recorded (secret query values redacted).

    Raises:
        InputError: an unknown source, or a framework request that is not JSON.

    """
    if source == "http":
        return canonical_json({"method": method.upper(), "url": url, "body": _body(request, url)})
    if source not in TURN_SOURCES:
        raise InputError(
            f"model turn source {source!r} is unknown (known: {', '.join(TURN_SOURCES)})",
            rule="source",
        )
    try:
        parsed = json.loads(request)
    except ValueError as exc:
        raise InputError(f"a {source} model request is not JSON ({exc})", rule="request") from None
    return value_key(source, parsed)


def value_key(source: str, request: Any) -> bytes:
    """:func:`turn_key` of a framework request given as its plain JSON value (not parsed again).

    Raises:
        CanonicalizationError: the value has no canonical JSON form.

    """
    return canonical_json(normal_form(source, request))


def stream_evidence(detail: Any) -> str | None:
    """The evidence id of a framework turn's streamed bytes (``detail.stream.evidence``).

    ``None``: a whole turn, or an HTTP stream (whose bytes are the response body).
    """
    stream = detail.get("stream")
    evidence = stream.get("evidence") if isinstance(stream, dict) else None
    return evidence if isinstance(evidence, str) else None


def key_text(key: bytes) -> str:
    """A match key shown for a diff: indented JSON, keys sorted, one value per line."""
    return json.dumps(json.loads(key), indent=2, sort_keys=True, ensure_ascii=False)


def exchange_key(source: str, request: bytes, detail: dict[str, Any]) -> bytes:
    """:func:`turn_key` of a recorded turn (``detail`` gives an HTTP turn's method and URL)."""
    return turn_key(
        source, request, method=str(detail.get("method", "")), url=str(detail.get("url", ""))
    )


class RecordedTurns:
    """The ``model`` step handler of a frozen execution: recorded turns, served by step id.

    Each step's turn is read back from the recorded trace when the step runs
    (:class:`~toolproof.runs.traceindex.TraceIndex`: its ``model_turn`` and its step's
    evidence records); nothing is held per turn.

    Args:
        recording: the recorded trace's index.
        directory: the directory holding the recorded evidence (a run, read through
            :class:`~toolproof.bundle.evidence.RunEvidence`, or a live session).
        pack: a live session's evidence pack as read (its items are served from it;
            the others from ``directory``'s evidence, as a run's).

    """

    def __init__(
        self, recording: TraceIndex, directory: Path, *, pack: PackContents | None = None
    ) -> None:
        self.directory = Path(directory)
        self.pack = pack
        self.stored = RunEvidence.open(self.directory)
        self.recording = recording

    def turn(self, step: str) -> _Turn | None:
        """The turn recorded for ``step`` (a step answered twice: its last), or ``None``."""
        registered: dict[str, EvidenceRecord] = {}
        recorded: _Turn | None = None
        for event in self.recording.find("turn", step):
            if isinstance(event, EvidenceRegistered):
                registered[event.evidence.id] = event.evidence
            elif isinstance(event, ModelTurn):
                request = registered.get(event.request)
                response = registered.get(event.response)
                stream_id = stream_evidence(event.detail)
                stream = None if stream_id is None else registered.get(stream_id)
                if request is not None and response is not None:
                    recorded = (event, request, response, stream)
        return recorded

    def __contains__(self, step: str) -> bool:
        return self.turn(step) is not None

    def _bytes(self, record: EvidenceRecord) -> bytes:
        hex_digest = record.digest.removeprefix("sha256:")
        if self.pack is not None and hex_digest in self.pack.items:
            return self.pack.read(hex_digest)  # its digest was checked when it was read
        where = str(self.directory / record.path)
        try:
            data = self.stored.read(record.id)
        except KeyError:
            raise InputError(
                f"model turn evidence {record.path} cannot be read: it is not stored",
                path=where,
            ) from None
        except OSError as exc:
            raise InputError(
                f"model turn evidence {record.path} cannot be read: {exc.strerror or exc}",
                path=where,
            ) from None
        except VerificationError as exc:
            raise InputError(
                f"model turn evidence {record.path} cannot be read: {exc.message}", path=where
            ) from None
        if digest(data) != record.digest:
            raise InputError(
                f"model turn evidence {record.path} does not match its recorded digest "
                f"{record.digest}",
                path=where,
            )
        return data

    async def __call__(self, node: PlanNode, context: StepContext) -> StepOutput:
        """Record the turn recorded for ``node`` again, from its recorded bytes.

        Returns:
            ``ok`` with the request's and the response's evidence; not ok when no turn
            was recorded for the step.

        Raises:
            InputError: the recorded bytes are missing or do not match their digest.

        """
        recorded = self.turn(node.id)
        if recorded is None:
            return StepOutput(node.id, False, reason=f"no model turn is recorded for {node.id!r}")
        event, request, response, stream = recorded
        exchange = ModelExchange(
            source=event.source,
            model=event.model,
            request=self._bytes(request),
            response=self._bytes(response),
            key=event.key,
            request_media_type=request.media_type,
            response_media_type=response.media_type,
            detail=dict(event.detail),
            stream=None if stream is None else self._bytes(stream),
        )
        records = context.record_model_turn(exchange)
        return StepOutput(node.id, True, None, records)
