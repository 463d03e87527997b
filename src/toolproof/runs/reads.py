"""The ``read`` and ``prompt`` steps: an MCP resource read or prompt get, recorded as evidence.

A spec step ``kind = "read"`` with ``params = {"uri": ...}`` reads a resource of the
Toolset's catalog (:mod:`toolproof.tools.catalog`: an ``[[mcp]]`` server's or a
``@toolproof.resource``); ``kind = "prompt"`` with ``params = {"name", "arguments"}``
gets a prompt. The step records ``resource_read`` (or ``prompt_got``) and the
answer's bytes as evidence (:meth:`~toolproof.runs.recorder.Recorder.read_block`:
one record per content item, kind ``resource``; a prompt's canonical JSON, kind
``prompt``), which claims cite like a tool result's. Recorded sessions write these
steps as they serve (``read-0000000N``, ``prompt-0000000N``).

Frozen (replay, finalizing a session) the answer is the recorded event of the same
step; a step that was not recorded, or asks for another URI, prompt or arguments,
refuses the replay (:class:`~toolproof.errors.ReplayRefused`).
"""

from __future__ import annotations

import logging
from typing import Any

from toolproof.contract.runs import PlanNode
from toolproof.contract.trace import PromptGot, ResourceRead
from toolproof.errors import InputError, ReplayRefused, ToolCallError
from toolproof.evidence.reasoners import StepOutput
from toolproof.runs.executor import StepContext
from toolproof.runs.traceindex import TraceIndex
from toolproof.tools.catalog import Catalog

logger = logging.getLogger("toolproof.runs")


def _source_failed(what: str, exc: Exception) -> str:
    """The reason of a step whose source raised ``exc``; the traceback goes to the log.

    A source is foreign code (a ``@resource``/``@prompt`` function, an MCP server): its
    failure fails the step, not the run, and is logged with its cause chain.
    """
    logger.warning("%s failed", what, exc_info=exc)
    if isinstance(exc, ToolCallError):
        return f"{what}: {exc.failure.kind}: {exc.failure.message}"
    return f"{what}: {type(exc).__module__}.{type(exc).__qualname__}: {exc}"


__all__ = ["PromptStep", "ReadStep"]


def _recorded(recording: TraceIndex | None, step: str, kind: type[Any]) -> Any:
    """The last event of ``kind`` recorded for ``step`` (``None``: none, or no recording)."""
    found = [] if recording is None else recording.find("step", step)
    return next((event for event in reversed(found) if isinstance(event, kind)), None)


def _refuse(node: PlanNode, why: str) -> ReplayRefused:
    return ReplayRefused(
        f"frozen replay refused: step {node.id!r} {why}; a live {node.kind.value} would be a "
        "new run",
        step=node.id,
        rule=why,
    )


class ReadStep:
    """The :class:`~toolproof.runs.executor.StepHandler` of ``read`` steps.

    Args:
        catalog: where live reads go (``None``: no resource can be read live).
        recording: the recorded trace's index a frozen run serves reads from.

    """

    def __init__(self, catalog: Catalog | None, recording: TraceIndex | None = None) -> None:
        self.catalog = catalog
        self.recording = recording

    async def __call__(self, node: PlanNode, context: StepContext) -> StepOutput:
        """Read ``params.uri`` (live) or serve the recorded read (frozen); record it.

        Raises:
            InputError: ``params`` is not ``{"uri": <string>}``, or no resource lists it.
            ReplayRefused: frozen, and this read was not recorded at this step.

        """
        uri = node.params.get("uri")
        if set(node.params) != {"uri"} or not isinstance(uri, str):
            raise InputError(f"read step {node.id!r}: params must be {{'uri': <string>}}")
        if context.mode == "frozen":
            event: ResourceRead | None = _recorded(self.recording, node.id, ResourceRead)
            if event is None:
                raise _refuse(node, f"reads {uri!r}, which the recorded run did not read")
            if event.uri != uri:
                raise _refuse(node, f"reads {uri!r}, recorded {event.uri!r}")
            result: dict[str, Any] = dict(event.result)
        else:
            entry = self.catalog.resource_for(uri) if self.catalog is not None else None
            if entry is None:
                raise InputError(f"read step {node.id!r}: no resource or template lists {uri!r}")
            try:
                result = await entry.answer(uri)
            except Exception as exc:  # the source failed: the step fails, the run goes on
                reason = _source_failed(f"resource {uri!r}", exc)
                return StepOutput(node.id, False, reason=reason)
        records = context.record_read(uri, result)
        return StepOutput(node.id, True, result, tuple(records), arguments={"uri": uri})


class PromptStep:
    """The :class:`~toolproof.runs.executor.StepHandler` of ``prompt`` steps.

    Args:
        catalog: where live gets go (``None``: no prompt can be fetched live).
        recording: the recorded trace's index a frozen run serves prompts from.

    """

    def __init__(self, catalog: Catalog | None, recording: TraceIndex | None = None) -> None:
        self.catalog = catalog
        self.recording = recording

    async def __call__(self, node: PlanNode, context: StepContext) -> StepOutput:
        """Get ``params.name`` with ``params.arguments`` (live) or serve the recorded one.

        Raises:
            InputError: ``params`` is not ``{"name": <string>, "arguments": {...}}``, or
                no such prompt.
            ReplayRefused: frozen, and this get was not recorded at this step.

        """
        name, arguments = node.params.get("name"), node.params.get("arguments", {})
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise InputError(
                f"prompt step {node.id!r}: params must be {{'name': <string>, "
                "'arguments': {...}}"
            )
        if context.mode == "frozen":
            event: PromptGot | None = _recorded(self.recording, node.id, PromptGot)
            if event is None:
                raise _refuse(node, f"gets prompt {name!r}, which the recorded run did not get")
            if (event.name, dict(event.arguments)) != (name, arguments):
                raise _refuse(
                    node,
                    f"gets prompt {name!r} with {arguments}, recorded {event.name!r} with "
                    f"{dict(event.arguments)}",
                )
            result: dict[str, Any] = dict(event.result)
        else:
            entry = self.catalog.prompts.get(name) if self.catalog is not None else None
            if entry is None:
                raise InputError(f"prompt step {node.id!r}: no prompt {name!r}")
            try:
                result = await entry.answer(arguments or None)
            except Exception as exc:  # the source failed: the step fails, the run goes on
                reason = _source_failed(f"prompt {name!r}", exc)
                return StepOutput(node.id, False, reason=reason)
        records = context.record_prompt(name, arguments, result)
        return StepOutput(node.id, True, result, tuple(records), arguments=arguments)
