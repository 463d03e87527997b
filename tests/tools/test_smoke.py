import asyncio

from toolproof import Tool


def add(a: int, b: int = 1) -> int:
    return a + b


def test_add_tool_call_returns_sum() -> None:
    result = asyncio.run(Tool.from_function(add).call({"a": 2, "b": 3}))
    assert (result.ok, result.value) == (True, 5)
