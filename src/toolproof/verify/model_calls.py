"""The tool calls a recorded model turn asked for, by the ids the model gave them.

A session's model recorders store each turn's response bytes as evidence
(docs/agents.md, *Model turns are evidence*). :func:`model_call_ids` reads, from those
bytes, the ids of the tool calls the response asked for, by the recorder that wrote
them (``source``):

* ``pydantic-ai``: a ``ModelResponse`` as canonical JSON: each part of ``part_kind``
  ``tool-call`` gives its ``tool_call_id``;
* ``openai-agents``: ``{"output": [...]}``: each item of ``type`` ``function_call``
  gives its ``call_id``;
* ``http``: the response body as JSON, in the shape of the API that answered: OpenAI
  chat completions (``choices[].message.tool_calls[].id``), the OpenAI Responses API
  (``output[]`` items of ``type`` ``function_call``: ``call_id``) or Anthropic messages
  (``content[]`` items of ``type`` ``tool_use``: ``id``); a body that is not JSON (an
  SSE stream) gives the ids of its ``data:`` lines' chunks
  (``choices[].delta.tool_calls[].id``).

:class:`ModelLinks` holds a run's ``tool_called`` events to what they say of the
model: the ``model_turn`` they name is a recorded turn before them whose response holds
their ``model_call_id`` (part of the ``call-linkage`` check).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from toolproof.contract.trace import ModelTurn, ToolCalled, TraceEvent

__all__ = ["ModelLinks", "call_origin", "check_model_links", "model_call_ids"]


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """The objects of a JSON list (anything else: none)."""
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _pydantic_ai(body: Any) -> Iterator[Any]:
    for part in _dicts(body.get("parts")):
        if part.get("part_kind") == "tool-call":
            yield part.get("tool_call_id")


def _responses_items(body: Any) -> Iterator[Any]:
    for item in _dicts(body.get("output")):
        if item.get("type") == "function_call":
            yield item.get("call_id")


def _http(body: Any) -> Iterator[Any]:
    for choice in _dicts(body.get("choices")):
        for key in ("message", "delta"):
            message = choice.get(key)
            if isinstance(message, dict):
                yield from (call.get("id") for call in _dicts(message.get("tool_calls")))
    yield from _responses_items(body)
    for block in _dicts(body.get("content")):
        if block.get("type") in ("tool_use", "server_tool_use"):
            yield block.get("id")


_READERS: dict[str, Callable[[Any], Iterator[Any]]] = {
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _responses_items,
    "http": _http,
}


def _bodies(response: bytes) -> list[Any]:
    """The JSON document ``response`` is, or each JSON ``data:`` line of an SSE stream."""
    try:
        return [json.loads(response)]
    except ValueError:
        pass
    bodies = []
    for line in response.splitlines():
        if line.startswith(b"data:"):
            try:
                bodies.append(json.loads(line[5:]))
            except ValueError:
                continue
    return bodies


def model_call_ids(source: str, response: bytes) -> list[str]:
    """The ids of the tool calls a recorded model response asked for, in order, each once.

    Args:
        source: the recorder (``pydantic-ai``, ``openai-agents``, ``http``); another
            source gives no id.
        response: the turn's exact response bytes (its ``model_response`` evidence).

    Returns:
        The non-empty string ids, in the order the response lists them, without
        repeats (an SSE stream repeats none: only a call's first chunk carries its id);
        ``[]`` for a response that asked for no tool call or that cannot be read.

    """
    reader = _READERS.get(source)
    if reader is None:
        return []
    ids: list[str] = []
    for body in _bodies(response):
        if isinstance(body, dict):
            for found in reader(body):
                if isinstance(found, str) and found and found not in ids:
                    ids.append(found)
    return ids


def call_origin(model_call_id: str | None, asked: dict[str, str]) -> dict[str, str] | None:
    """The ``tool_called`` fields of a call the agent's model gave ``model_call_id``.

    Args:
        model_call_id: the id, or ``None`` when the framework gave none.
        asked: the step of the last recorded model turn whose response asked for a tool
            call, by that call's id (:func:`model_call_ids` of each recorded turn).

    Returns:
        ``{"model_call_id"}``, with ``"model_turn"`` when ``asked`` holds the id;
        ``None`` without an id.

    """
    if not model_call_id:
        return None
    origin = {"model_call_id": model_call_id}
    turn = asked.get(model_call_id)
    if turn is not None:
        origin["model_turn"] = turn
    return origin


class ModelLinks:
    """The model links of a run's ``tool_called`` events, checked as the trace streams by.

    Each ``tool_called`` that names a ``model_turn`` must also name a ``model_call_id``,
    and that turn must be a ``model_turn`` event recorded before it whose response bytes
    (:func:`model_call_ids`) hold that id.

    Args:
        read: reads an evidence item by its evidence id (``None``: it is not stored; the
            ``evidence-digests`` check reports that, so it is not reported again here).

    """

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self.read = read
        self.turns: dict[str, ModelTurn] = {}
        self.asked: dict[str, list[str]] = {}

    def feed(self, event: TraceEvent) -> list[tuple[int, str]]:
        """What is wrong with ``event``'s model link: ``(event index, message)`` each."""
        if isinstance(event, ModelTurn):
            self.turns[event.step] = event
            return []
        if not isinstance(event, ToolCalled) or event.model_turn is None:
            return []
        named = event.model_turn
        if event.model_call_id is None:
            return [(event.idx, f"the call names model turn {named!r} but no model_call_id")]
        turn = self.turns.get(named)
        if turn is None:
            why = "which is not a model_turn recorded before it"
            return [(event.idx, f"the call names model turn {named!r}, {why}")]
        if turn.step not in self.asked:
            data = self.read(turn.response)
            if data is None:
                return []
            self.asked[turn.step] = model_call_ids(turn.source, data)
        ids = self.asked[turn.step]
        if event.model_call_id in ids:
            return []
        return [
            (
                event.idx,
                f"the call says model turn {named!r} asked for it as {event.model_call_id!r}, "
                f"but that turn's recorded response asks for tool call ids: "
                f"{', '.join(ids) or 'none'}",
            )
        ]


def check_model_links(
    events: Iterable[TraceEvent], read: Callable[[str], bytes | None]
) -> list[tuple[int, str]]:
    """What is wrong with the model links of ``events`` (:class:`ModelLinks`), in trace order.

    Args:
        events: the run's trace events, in order.
        read: reads an evidence item by its evidence id (``None``: not stored).

    Returns:
        ``(event index, message)`` per problem.

    """
    links = ModelLinks(read)
    return [problem for event in events for problem in links.feed(event)]
