"""pydantic-ai's messages and responses as plain JSON, as its type adapters dump them.

A recorded pydantic-ai turn stores the canonical JSON of ``dump_python(value,
mode="json")`` of its messages (``ModelMessagesTypeAdapter``) and of its response
(``TypeAdapter(ModelResponse)``). Two Python callbacks in those adapters' serializers
cost most of a short turn's dump (about 7 of 11 us for a one-part response) and change
nothing for the values they are given here:

* pydantic's ``serialize_sequence_via_list``, the serializer of a ``Sequence[...]``
  field (``parts``): given a ``list``, it serializes each item with the item
  serializer, in order, and returns the list of them in JSON mode; a list serializer
  of the same items does that in Rust;
* pydantic-ai's usage serializer of ``ModelResponse.usage``: it adds to the fields'
  dump the attributes a ``RequestUsage`` was given beyond its fields; without any, the
  result is the fields' dump.

What a callback returns in JSON mode is inferred again, which turns a non-finite float
into ``None``: only the usage's ``float`` fields (``audio_seconds``) can hold one
there.

:func:`messages_json` and :func:`response_json` dump with a serializer built from the
adapter's own core schema and core config, those two callbacks replaced where they
serialize a ``ModelRequest``'s or ``ModelResponse``'s ``parts`` and a
``ModelResponse``'s ``usage`` (every other callback is kept: nested sequences, file
recording, instruction ids). Before each dump they check what the replacements rely
on: every message of exactly ``ModelRequest`` or ``ModelResponse``, its ``parts`` a
``list``, its usage exactly a ``RequestUsage`` holding only its fields, its ``float``
fields finite. Any other value, and any value whose lean dump raises, goes to the
adapter's own serializer, so the result is the adapter's value, key order included, or
the adapter's error (property tests hold the two equal). Two differences remain, both
for values the adapter itself warns about or refuses: a value of the wrong type in a
field is warned about in one warning where the adapter may give one per callback; and
the callbacks cost two levels of pydantic's serialization depth, so a value nested 253
or 254 levels deep dumps here where the adapter raises (canonical JSON refuses it all
the same: :func:`toolproof.adapters.pydantic_ai_model.response_bytes` then takes the
adapter's dump, and its error). A pydantic or pydantic-ai whose schemas have other
shapes builds no lean serializer: the adapter's own is used (see :func:`lean`).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse
from pydantic_ai.usage import RequestUsage
from pydantic_core import SchemaError, SchemaSerializer

__all__ = ["RESPONSE_ADAPTER", "lean", "messages_json", "response_json"]

RESPONSE_ADAPTER: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
"""The adapter whose ``dump_python(mode="json")`` a recorded response is, and which
frozen replay parses a recorded response with."""

_SEQUENCE_VIA_LIST = ("pydantic._internal._serializers", "serialize_sequence_via_list")
_USAGE = ("pydantic_ai.usage", "UsageBase.__get_pydantic_core_schema__.<locals>.serialize")
"""The two callbacks replaced, by their functions' module and qualified name."""
_REPLACED = {
    (ModelRequest, "parts"): _SEQUENCE_VIA_LIST,
    (ModelResponse, "parts"): _SEQUENCE_VIA_LIST,
    (ModelResponse, "usage"): _USAGE,
}
"""Where each is replaced: the (dataclass, field) it serializes."""
_USAGE_FIELDS = frozenset(field.name for field in dataclasses.fields(RequestUsage))


def _float_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of dataclass ``cls`` typed ``float``, or ``None`` if its hints do not resolve."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        return None
    return tuple(f.name for f in dataclasses.fields(cls) if hints.get(f.name) is float)


_USAGE_FLOATS = _float_fields(RequestUsage)
"""The usage's ``float`` fields (``None``: every attribute is checked)."""

_Dump = Callable[..., Any]


def _code_name(function: object) -> tuple[object, object]:
    return getattr(function, "__module__", None), getattr(function, "__qualname__", None)


def _rewrite(node: Any, owner: Any, field: Any, found: set[tuple[Any, Any]]) -> Any:
    """A copy of core schema ``node`` with the :data:`_REPLACED` callbacks replaced.

    Args:
        node: a core schema (dicts and lists; anything else is kept as it is).
        owner: the dataclass whose field ``node`` is inside (the nearest one).
        field: that field's name.
        found: gains each (dataclass, field) whose callback was replaced.

    """
    if isinstance(node, list):
        return [_rewrite(item, owner, field, found) for item in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "dataclass":
        owner, field = node.get("cls"), None
    elif kind == "dataclass-field":
        field = node.get("name")
    serialization = node.get("serialization")
    replaced = _REPLACED.get((owner, field)) if owner is not None and field is not None else None
    if (
        replaced is not None
        and "ref" not in node  # a node other nodes refer to is kept whole
        and isinstance(serialization, dict)
        and serialization.get("type") == "function-wrap"
        and _code_name(serialization.get("function")) == replaced
        and "schema" in serialization
    ):
        place = (owner, field)
        if replaced == _USAGE:  # the usage dataclass's own schema
            found.add(place)
            return _rewrite(serialization["schema"], owner, field, found)
        if kind == "json-or-python":  # for a list the callback serializes each item, in order
            found.add(place)
            return {
                "type": "list",
                "items_schema": _rewrite(serialization["schema"], *place, found),
            }
    return {key: _rewrite(value, owner, field, found) for key, value in node.items()}


def _lean_serializer(adapter: TypeAdapter[Any]) -> SchemaSerializer | None:
    """The adapter's serializer less the :data:`_REPLACED` callbacks, or ``None``.

    ``None`` when its schema has none of them where expected, or its core config or the
    rewritten schema cannot be built (another pydantic version).
    """
    try:
        from pydantic._internal._config import ConfigWrapper  # private: guarded, below

        config = ConfigWrapper(adapter._config).core_config(None)
        found: set[tuple[Any, Any]] = set()
        schema = _rewrite(adapter.core_schema, None, None, found)
        return SchemaSerializer(schema, config) if found else None
    except (ImportError, AttributeError, TypeError, SchemaError):
        return None


def _plain_response(response: object) -> bool:
    """Whether ``response`` is a ``ModelResponse`` the lean serializer dumps as the adapter does."""
    if type(response) is not ModelResponse:
        return False
    usage = response.usage
    if not (
        type(response.parts) is list
        and type(usage) is RequestUsage
        and usage.__dict__.keys() <= _USAGE_FIELDS
    ):
        return False
    names = usage.__dict__ if _USAGE_FLOATS is None else _USAGE_FLOATS
    for name in names:
        value = getattr(usage, name)
        if type(value) is float and not math.isfinite(value):
            return False
    return True


def _plain(message: object) -> bool:
    """Whether ``message`` is one the lean serializer dumps as the adapter does."""
    if type(message) is ModelRequest:
        return type(message.parts) is list
    return _plain_response(message)


class _Dumps:
    """The adapters' serializers and their lean ones, built on first use (a few ms)."""

    def __init__(self) -> None:
        self.built = False
        self.messages: _Dump = ModelMessagesTypeAdapter.dump_python
        self.response: _Dump = RESPONSE_ADAPTER.dump_python
        self.messages_lean: _Dump | None = None
        self.response_lean: _Dump | None = None

    def build(self) -> _Dumps:
        """Build both (the adapters' own, then the lean ones); return this object."""
        for adapter in (ModelMessagesTypeAdapter, RESPONSE_ADAPTER):
            adapter.rebuild()  # a deferred adapter (ModelMessagesTypeAdapter) builds now
        self.messages = ModelMessagesTypeAdapter.serializer.to_python
        self.response = RESPONSE_ADAPTER.serializer.to_python
        lean_messages = _lean_serializer(ModelMessagesTypeAdapter)
        lean_response = _lean_serializer(RESPONSE_ADAPTER)
        self.messages_lean = None if lean_messages is None else lean_messages.to_python
        self.response_lean = None if lean_response is None else lean_response.to_python
        self.built = True
        return self


_DUMPS = _Dumps()


def messages_json(messages: list[ModelMessage]) -> Any:
    """``ModelMessagesTypeAdapter.dump_python(messages, mode="json")``, leaner.

    Args:
        messages: the messages of a pydantic-ai request.

    Returns:
        The adapter's plain JSON of ``messages`` (a list of dicts).

    Raises:
        PydanticSerializationError: as the adapter's dump raises it.

    """
    dumps = _DUMPS if _DUMPS.built else _DUMPS.build()
    if dumps.messages_lean and type(messages) is list and all(map(_plain, messages)):
        try:
            return dumps.messages_lean(messages, mode="json")
        except Exception:  # the adapter's dump, below, runs again and raises its own error
            pass
    return dumps.messages(messages, mode="json")


def response_json(response: ModelResponse) -> Any:
    """``TypeAdapter(ModelResponse).dump_python(response, mode="json")``, leaner.

    Args:
        response: the response a pydantic-ai model returned.

    Returns:
        :data:`RESPONSE_ADAPTER`'s plain JSON of ``response`` (a dict).

    Raises:
        PydanticSerializationError: as the adapter's dump raises it.

    """
    dumps = _DUMPS if _DUMPS.built else _DUMPS.build()
    if dumps.response_lean and _plain_response(response):
        try:
            return dumps.response_lean(response, mode="json")
        except Exception:  # the adapter's dump, below, runs again and raises its own error
            pass
    return dumps.response(response, mode="json")


def lean() -> tuple[bool, bool]:
    """Whether :func:`messages_json` and :func:`response_json` have a lean serializer.

    Returns:
        ``(messages, response)``: ``False`` where this pydantic's or pydantic-ai's
        schema has another shape and the adapter's own serializer is used for every
        value.

    """
    dumps = _DUMPS if _DUMPS.built else _DUMPS.build()
    return dumps.messages_lean is not None, dumps.response_lean is not None
