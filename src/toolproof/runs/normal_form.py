"""The provider-neutral normal form of a framework's model request: what frozen replay matches.

A recorded pydantic-ai or OpenAI Agents SDK request is the framework's own dump, and an
HTTP turn's body is what an SDK (the ``openai`` SDK, LangChain's ``ChatOpenAI`` on it)
serialized; a new release of either may add a field with a default value to any of its
objects. Frozen replay therefore matches a turn on :func:`normal_form` of the request,
not on the dump (docs/agents.md, "Replay matching", lists every field)::

    {"messages": [...], "tools": [...], "settings": {...}, "output": {...}, "other": {...}}

* ``messages``: the conversation as a model sees it, one entry per system prompt,
  instruction, user prompt, assistant text, assistant tool call, tool result and retry
  prompt: ``{"role": "system"|"user"|"assistant"|"tool"|"retry", "content"?,
  "tool_calls"?: [{"id", "name", "arguments"}], "tool_call_id"?, "name"?,
  "thinking"?}``, arguments parsed when they are a JSON text. Anything else (a part
  kind this toolproof does not know) is kept as ``{"role": "other", "part": ...}``
  without its empty fields. Timestamps, run and message ids, usage, provider
  bookkeeping of earlier responses are not in it;
* ``tools``: every function tool shown to the model, ``{"name", "description",
  "parameters", "strict"}``;
* ``settings``: the model settings that are set (a ``None`` one is absent);
* ``output``: how the answer must come (pydantic-ai: output mode, output tools, text
  and image output allowed, output object and template, native tools, thinking; the
  SDK: output schema, handoffs), set fields only;
* ``other``: the SDK's ``previous_response_id``, ``conversation_id`` and ``prompt``
  when set.

An OpenAI-compatible chat completions body (source ``openai-chat``: an HTTP turn whose
URL path ends with ``/chat/completions``) has the same five fields: its ``messages``
(a message's text parts joined, ``tool_calls[].function`` as ``{"id", "name",
"arguments"}``), its function ``tools``, every other set field as ``settings``
(``model``, ``temperature``, ``tool_choice``...), ``response_format`` as ``output``.

"Set" means not ``None``, ``false``, ``[]`` or ``{}``: a field a new release adds with
such a default leaves the normal form as it was. Schemas, arguments and contents are
kept whole (``"additionalProperties": false`` in a schema matters).
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

__all__ = [
    "CHAT_COMPLETIONS",
    "FRAMEWORK_DISTRIBUTIONS",
    "framework_detail",
    "normal_form",
    "version_change",
]

FRAMEWORK_DISTRIBUTIONS = {"pydantic-ai": "pydantic-ai-slim", "openai-agents": "openai-agents"}
"""The distribution whose version a turn of each framework recorder records."""
CHAT_COMPLETIONS = "openai-chat"
"""The :func:`normal_form` source of an OpenAI-compatible chat completions request body."""

_UNSET: tuple[Any, ...] = (None, False, [], {})
_PYDANTIC_OUTPUT = (
    "output_mode",
    "output_object",
    "allow_text_output",
    "allow_image_output",
    "prompted_output_template",
    "native_tools",
    "thinking",
)


def normal_form(source: str, request: Any) -> Any:
    """The normal form of a recorded or asked request of ``source`` (module docstring).

    Args:
        source: ``pydantic-ai``, ``openai-agents`` or ``openai-chat`` (a chat
            completions body; any other: ``request`` itself).
        request: the request's plain JSON value, as the recorder stores it.

    Returns:
        ``{"messages", "tools", "settings", "output", "other"}`` (plain JSON).

    """
    if not isinstance(request, dict):
        return request
    if source == "pydantic-ai":
        return _pydantic_ai(request)
    if source == "openai-agents":
        return _agents(request)
    if source == CHAT_COMPLETIONS:
        return _chat(request)
    return request


def framework_detail(source: str) -> dict[str, str]:
    """What a turn of ``source`` records of its framework: ``{"framework", "version"}``.

    Returns:
        The installed distribution and its version (``{"framework": "pydantic-ai-slim",
        "version": "2.78.0"}``), stored in the ``model_turn`` event's ``detail``; ``{}``
        for ``http`` or a framework that is not installed.

    """
    dist = FRAMEWORK_DISTRIBUTIONS.get(source)
    if dist is None:
        return {}
    try:
        return {"framework": dist, "version": metadata.version(dist)}
    except metadata.PackageNotFoundError:
        return {}


def version_change(source: str, detail: dict[str, Any], asked: dict[str, Any] | None = None) -> str:
    """``" (recorded under pydantic-ai-slim 2.78.0, replayed under 2.80.0)"``, or ``""``.

    ``""`` when the recorded turn's ``detail`` names no version (a turn recorded
    before turns named it) or the installed version is the recorded one. An ``http``
    turn names the client that sent it by its ``User-Agent`` (``detail["client"]``,
    ``AsyncOpenAI/Python 3.63.0``): ``" (recorded by AsyncOpenAI/Python 3.62.0,
    replayed by AsyncOpenAI/Python 3.63.0)"`` when ``asked["client"]``, the asked
    request's, differs.
    """
    if source == "http":
        sent, sending = detail.get("client"), (asked or {}).get("client")
        if not isinstance(sent, str) or not isinstance(sending, str) or sent == sending:
            return ""
        return f" (recorded by {sent}, replayed by {sending})"
    now = framework_detail(source)
    then = detail.get("version")
    if not isinstance(then, str) or not now or now["version"] == then:
        return ""
    framework = detail.get("framework", now["framework"])
    return f" (recorded under {framework} {then}, replayed under {now['version']})"


def _set(value: Any) -> dict[str, Any]:
    """The fields of an object that are set (not ``None``, ``false``, ``[]``, ``{}``)."""
    if not isinstance(value, dict):
        return {}
    return {
        k: v for k, v in value.items() if not any(v == u and type(v) is type(u) for u in _UNSET)
    }


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _tool(name: Any, description: Any, parameters: Any, strict: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": description or "",
        "parameters": parameters,
        "strict": bool(strict),
    }


def _pydantic_part(kind: str, part: dict[str, Any]) -> dict[str, Any]:
    content = part.get("content")
    if kind == "system-prompt":
        return {"role": "system", "content": content}
    if kind == "user-prompt":
        return {"role": "user", "content": content}
    if kind in ("tool-return", "retry-prompt"):
        role = "tool" if kind == "tool-return" else "retry"
        entry = {"role": role, "content": content, "tool_call_id": part.get("tool_call_id")}
        return {**entry, "name": part.get("tool_name")}
    if kind == "text":
        return {"role": "assistant", "content": content}
    if kind == "tool-call":
        call = {"id": part.get("tool_call_id"), "name": part.get("tool_name")}
        return {
            "role": "assistant",
            "tool_calls": [{**call, "arguments": _arguments(part.get("args"))}],
        }
    if kind == "thinking":
        return {"role": "assistant", "thinking": content}
    kept = {k: v for k, v in _set(part).items() if k not in ("timestamp", "id")}
    return {"role": "other", "part": kept}


def _pydantic_ai(request: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            messages.append({"role": "other", "part": message})
            continue
        if message.get("instructions"):
            messages.append({"role": "system", "content": message["instructions"]})
        for part in message.get("parts") or []:
            if isinstance(part, dict):
                messages.append(_pydantic_part(str(part.get("part_kind", "")), part))
            else:
                messages.append({"role": "other", "part": part})
    given = request.get("parameters")
    parameters: dict[str, Any] = given if isinstance(given, dict) else {}

    def tools(key: str) -> list[dict[str, Any]]:
        return [
            _tool(
                t.get("name"),
                t.get("description"),
                t.get("parameters_json_schema"),
                t.get("strict"),
            )
            for t in parameters.get(key) or []
            if isinstance(t, dict)
        ]

    output = _set({key: parameters.get(key) for key in _PYDANTIC_OUTPUT})
    output = {**output, **_set({"tools": tools("output_tools")})}
    return {
        "messages": messages,
        "tools": tools("function_tools"),
        "settings": _set(request.get("model_settings")),
        "output": output,
        "other": {},
    }


def _agents_item(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        return {"role": "other", "part": item}
    kind = item.get("type")
    if kind == "function_call":
        call = {"id": item.get("call_id"), "name": item.get("name")}
        return {
            "role": "assistant",
            "tool_calls": [{**call, "arguments": _arguments(item.get("arguments"))}],
        }
    if kind == "function_call_output":
        return {"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id")}
    if kind in (None, "message") and "role" in item:
        content = item.get("content")
        if isinstance(content, list) and all(
            isinstance(c, dict) and c.get("type") == "output_text" for c in content
        ):
            content = "".join(str(c.get("text", "")) for c in content)
        return {"role": item["role"], "content": content}
    kept = {k: v for k, v in _set(item).items() if k not in ("id", "status")}
    return {"role": "other", "part": kept}


def _agents(request: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if request.get("system_instructions"):
        messages.append({"role": "system", "content": request["system_instructions"]})
    given = request.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    else:
        messages.extend(_agents_item(item) for item in given or [])
    tools = []
    for tool in request.get("tools") or []:
        if isinstance(tool, dict) and "params_json_schema" in tool:
            schema, strict = tool.get("params_json_schema"), tool.get("strict_json_schema")
            tools.append(_tool(tool.get("name"), tool.get("description"), schema, strict))
        elif isinstance(tool, dict):
            tools.append({"other": _set(tool)})
    return {
        "messages": messages,
        "tools": tools,
        "settings": _set(request.get("model_settings")),
        "output": _set(
            {"schema": request.get("output_schema"), "handoffs": request.get("handoffs")}
        ),
        "other": _set(
            {k: request.get(k) for k in ("previous_response_id", "conversation_id", "prompt")}
        ),
    }


def _text(content: Any) -> Any:
    """A chat message's content: a list of text parts joined into one string."""
    if isinstance(content, list) and all(
        isinstance(c, dict) and c.get("type") == "text" for c in content
    ):
        return "".join(str(c.get("text", "")) for c in content)
    return content


def _chat_message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return {"role": "other", "part": message}
    entry = {k: v for k, v in _set(message).items() if k != "function_call"}
    if "content" in entry:
        entry["content"] = _text(entry["content"])
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            calls.append({"other": call})
            continue
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": _arguments(function.get("arguments")),
            }
        )
    if calls:
        entry["tool_calls"] = calls
    return entry


def _chat(request: dict[str, Any]) -> dict[str, Any]:
    tools = []
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and tool.get("type", "function") == "function":
            tools.append(
                _tool(
                    function.get("name"),
                    function.get("description"),
                    function.get("parameters"),
                    function.get("strict"),
                )
            )
        else:
            tools.append({"other": _set(tool) if isinstance(tool, dict) else tool})
    rest = {k: v for k, v in request.items() if k not in ("messages", "tools", "response_format")}
    return {
        "messages": [_chat_message(m) for m in request.get("messages") or []],
        "tools": tools,
        "settings": _set(rest),
        "output": _set({"schema": request.get("response_format")}),
        "other": {},
    }
