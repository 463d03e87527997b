"""Python callables with real signatures (adapters/callable.py)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Literal

import pytest

from toolproof import ToolCallError, ToolContribution, bind_contribution
from toolproof.adapters.frameworks.callable import OMITTED, as_callable


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.calls.append(arguments)
        return len(arguments)


WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "units": {"enum": ["c", "f", None]},
        "days": {"type": "integer", "default": 3},
        "tags": {"type": "array", "items": {"type": "string"}},
        "self": {"type": ["number", "null"]},
    },
    "required": ["city"],
}


def _callable(schema: Any, name: str = "weather.now") -> tuple[Any, Recorder]:
    recorder = Recorder()
    tool = bind_contribution(ToolContribution(name, "Weather now.", schema, recorder))
    return as_callable(tool), recorder


def test_named_form_shows_the_real_parameters() -> None:
    fn, _ = _callable(WEATHER)
    assert inspect.iscoroutinefunction(fn)
    assert fn.__name__ == "weather_now"
    assert fn.__doc__ == "Weather now."
    assert str(inspect.signature(fn)) == (
        "(*, city: str, units: Literal['c', 'f', None] = OMITTED, days: int = OMITTED, "
        "tags: list[str] = OMITTED, self: float | None = OMITTED) -> Any"
    )
    parameters = inspect.signature(fn).parameters
    assert parameters["units"].annotation == Literal["c", "f", None]


def test_named_form_sends_only_what_was_given() -> None:
    fn, recorder = _callable(WEATHER)
    assert asyncio.run(fn(city="Oslo")) == 1
    assert asyncio.run(fn(city="Oslo", units=None, self=None)) == 3
    assert recorder.calls == [{"city": "Oslo"}, {"city": "Oslo", "units": None, "self": None}]


def test_named_form_refuses_bad_arguments() -> None:
    fn, recorder = _callable(WEATHER)
    with pytest.raises(ToolCallError) as info:
        asyncio.run(fn(city="Oslo", days="3"))
    assert info.value.failure.message == (
        "invalid arguments for tool 'weather.now': "
        'argument \'days\': "3" is not of type "integer"'
    )
    with pytest.raises(TypeError, match="city"):
        asyncio.run(fn())
    with pytest.raises(TypeError):
        asyncio.run(fn("Oslo"))  # keyword-only
    assert recorder.calls == []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"from": {"type": "string"}}},
        {"type": "object", "properties": {"_x": {"type": "string"}}},
        {"type": "object", "properties": {"model_config": {"type": "object"}}},
        {"type": "object", "properties": {"a.b": {"type": "string"}}},
        {"type": "object", "properties": {"json": {"type": "string"}}},
        {},
        {"type": "object", "allOf": [{"properties": {"a": {}}}]},
    ],
)
def test_dict_form_when_names_do_not_allow_a_signature(schema: dict[str, Any]) -> None:
    fn, recorder = _callable(schema, name="1-tool")
    assert fn.__name__ == "tool_1_tool"
    assert str(inspect.signature(fn)) == "(arguments: dict[str, typing.Any]) -> Any"
    properties = schema.get("properties", {"a": {}})
    arguments = {key: {} if sub.get("type") == "object" else "v" for key, sub in properties.items()}
    assert asyncio.run(fn(arguments)) == len(arguments)
    assert recorder.calls == [arguments]
    assert recorder.calls[0] is arguments


def test_omitted_is_a_falsy_singleton() -> None:
    assert repr(OMITTED) == "OMITTED"
    assert not OMITTED
    assert type(OMITTED)() is OMITTED


def test_the_tool_is_reachable() -> None:
    fn, _ = _callable(WEATHER)
    assert fn.__toolproof_tool__.name == "weather.now"
