"""The backstop: validating one call is bounded in time and memory (issue 30 item 1, rule b).

The bind-time limits count on the walker's model of the validator; when that model is
wrong (a URI spelling it did not know, a fanout a caller states) one invalid call cost
a minute and 2.8 GB with the event loop blocked. A schema that needs isolation now
validates in a worker process under a deadline and a memory cap: past either the call
is ``invalid_arguments`` naming the limit, the worker is replaced, and the event loop
keeps serving other calls meanwhile.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_declared_uri_spellings import spelling_bomb

import toolproof
from toolproof import ConfigError, load_toolset
from toolproof.contract.tools import ToolSpec
from toolproof.identity import canonical_json
from toolproof.schema.isolation import (
    DEFAULT_BOUNDS,
    IsolatedSchema,
    ValidationBounds,
    configure_validation,
    validation_bounds,
)
from toolproof.schema.limits import needs_isolation
from toolproof.tools.tool import Tool


async def _echo(arguments: dict[str, Any]) -> Any:
    return arguments


@pytest.fixture(autouse=True)
def _default_bounds() -> Iterator[None]:
    yield
    configure_validation(DEFAULT_BOUNDS)


def _bomb_tool() -> Tool:
    # The walker refuses this schema (rule a). A caller that builds the Tool itself and
    # states its fanout bypasses that count: 10**5 applications per value, about 11 s
    # and 530 MB to collect the errors of {"v": 1.5}.
    schema = spelling_bomb("scheme case", 6, decoy_first=True)
    return Tool(ToolSpec(name="bomb", input_schema=schema), _echo, fanout=1)


def _light_tool() -> Tool:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return Tool(ToolSpec(name="light", input_schema=schema), _echo)


def _rule(limit: str) -> str:
    return (
        f"validation exceeded {limit} (rule: validating one call of a schema that needs "
        "isolation is bounded to {seconds} and {memory} in a worker process, "
        "ValidationBounds; the worker was stopped)"
    )


def test_a_call_past_the_deadline_is_invalid_arguments_naming_it() -> None:
    configure_validation(ValidationBounds(seconds=1))
    tool = _bomb_tool()
    result = asyncio.run(tool.call({"v": 1.5}))
    assert result.failure is not None
    assert result.failure.kind == "invalid_arguments"
    assert result.failure.message == "invalid arguments for tool 'bomb': " + _rule("1 s").format(
        seconds="1 s", memory="1 GiB"
    )
    assert result.failure.detail == {
        "errors": [{"pointer": "", "message": "validation exceeded 1 s"}]
    }
    # the worker was replaced: the next call of the same tool validates
    assert asyncio.run(tool.call({"v": "s"})).value == {"v": "s"}


def test_a_call_past_the_memory_cap_is_invalid_arguments_naming_it() -> None:
    configure_validation(ValidationBounds(seconds=600, memory_bytes=128 << 20))
    tool = _bomb_tool()
    result = asyncio.run(tool.call({"v": 1.5}))
    assert result.failure is not None
    assert result.failure.kind == "invalid_arguments"
    assert result.failure.message == "invalid arguments for tool 'bomb': " + _rule(
        "128 MiB"
    ).format(seconds="600 s", memory="128 MiB")
    assert asyncio.run(tool.call({"v": "s"})).ok


def test_the_synchronous_check_is_bounded_too() -> None:
    configure_validation(ValidationBounds(seconds=1))
    refused = _bomb_tool().check_arguments({"v": 1.5})
    assert refused is not None and refused.failure is not None
    assert refused.failure.detail == {
        "errors": [{"pointer": "", "message": "validation exceeded 1 s"}]
    }


def test_a_runaway_validation_never_delays_another_call() -> None:
    configure_validation(ValidationBounds(seconds=8))
    bomb, light = _bomb_tool(), _light_tool()
    # another tool whose schema needs isolation too (an embedded $id): the second worker
    other = Tool(ToolSpec(name="other", input_schema={"$id": "urn:other", "type": "object"}), _echo)
    finished: list[str] = []

    async def run(tool: Tool, arguments: dict[str, Any]) -> None:
        result = await tool.call(arguments)
        kind = "ok" if result.failure is None else result.failure.kind
        finished.append(f"{tool.name}:{kind}")

    async def main() -> None:
        await asyncio.gather(run(other, {}), run(other, {}))  # both workers started
        heavy = asyncio.create_task(run(bomb, {"v": 1.5}))
        await asyncio.sleep(0)  # the heavy call is in its worker
        for n in range(20):  # the event loop keeps serving: each light call completes
            await run(light, {"n": n})
        for n in range(3):
            await run(other, {"n": n})
        assert not heavy.done()
        finished.append("others done")
        await heavy

    asyncio.run(main())
    assert finished == ["other:ok"] * 2 + ["light:ok"] * 20 + ["other:ok"] * 3 + [
        "others done",
        "bomb:invalid_arguments",
    ]


def test_results_of_a_heavy_output_schema_are_bounded_too() -> None:
    configure_validation(ValidationBounds(seconds=1))
    schema = spelling_bomb("scheme case", 6, decoy_first=True)
    spec = ToolSpec(name="bomb", input_schema={"type": "object"}, output_schema=schema)

    async def body(arguments: dict[str, Any]) -> Any:
        return {"v": 1.5}

    result = asyncio.run(Tool(spec, body, output_fanout=1).call({}))
    assert result.failure is not None and result.failure.kind == "invalid_result"
    assert result.failure.message == (
        "tool 'bomb' returned a value that could not be checked against its output schema: "
        + _rule("1 s").format(seconds="1 s", memory="1 GiB")
    )


@pytest.mark.parametrize(
    ("schema", "isolated"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {}}}, False),
        ({"properties": {"a": {"$ref": "urn:a"}}, "$defs": {"A": {"$id": "urn:a"}}}, True),
        ({"properties": {"a": {"$ref": "#a"}}, "$defs": {"A": {"$anchor": "a"}}}, True),
        ({"$dynamicAnchor": "n", "properties": {"a": {"$dynamicRef": "#n"}}}, True),
        ({"$schema": "http://json-schema.org/draft-04/schema#", "id": "urn:x"}, True),
        ({"properties": {"id": {"type": "string"}}}, False),  # a property named id
    ],
)
def test_which_schemas_validate_in_the_worker(schema: dict[str, Any], isolated: bool) -> None:
    assert needs_isolation(canonical_json(schema), 1) is isolated
    assert needs_isolation(canonical_json(schema), 65) is True  # past INLINE_FANOUT


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        ({"seconds": 0}, "ValidationBounds.seconds must be in (0, 3600], not 0"),
        (
            {"memory_bytes": 1 << 20},
            "ValidationBounds.memory_bytes must be an integer of at least 64 MiB (67108864), "
            "not 1048576",
        ),
        ({"workers": 0}, "ValidationBounds.workers must be 1 to 64, not 0"),
    ],
)
def test_bounds_are_checked(bounds: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        ValidationBounds(**bounds)
    assert str(info.value) == message
    assert validation_bounds() == DEFAULT_BOUNDS


def test_the_config_file_sets_the_bounds(tmp_path: Path) -> None:
    file = tmp_path / "toolproof.toml"
    file.write_text("[validation]\nseconds = 0.5\nmemory_mib = 256\nworkers = 1\n")

    async def load() -> None:
        async with load_toolset(file):
            pass

    asyncio.run(load())
    assert validation_bounds() == ValidationBounds(0.5, 256 << 20, 1)
    file.write_text("[validation]\nmemory_mib = 16\n")
    with pytest.raises(ConfigError) as info:
        asyncio.run(load())
    assert info.value.fields["key"] == "validation.memory_mib"
    assert info.value.fields["rule"] == "Input should be greater than or equal to 64"


def test_workers_import_this_toolproof_not_the_working_directory(tmp_path: Path) -> None:
    # a user's json.py in the folder a server runs from must not replace the worker's
    (tmp_path / "json.py").write_text("raise SystemExit('a json.py of the working directory')\n")
    script = tmp_path / "scripts" / "check.py"
    script.parent.mkdir()
    script.write_text(
        "import asyncio\n"
        "from toolproof.schema.isolation import IsolatedSchema\n"
        "schema = IsolatedSchema({'$id': 'urn:x', 'type': 'integer'})\n"
        "print(asyncio.run(schema.errors('s', 8)))\n"
    )
    source = str(Path(toolproof.__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": source},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "[('', '\"s\" is not of type \"integer\"')]\n")


def _validate_in_child() -> None:
    schema = IsolatedSchema({"$id": "urn:x", "type": "integer"})
    found = asyncio.run(schema.errors("s", 8))
    raise SystemExit(0 if found == [("", '"s" is not of type "integer"')] else 3)


def test_a_forked_child_validates_with_a_pool_of_its_own() -> None:
    schema = IsolatedSchema({"$id": "urn:x", "type": "integer"})
    assert asyncio.run(schema.errors(1, 8)) == []  # the parent's pool is running
    child = multiprocessing.get_context("fork").Process(target=_validate_in_child)
    child.start()
    child.join(120)  # the parent's executor threads do not exist in the child
    child.kill()
    assert child.exitcode == 0


def test_reconfiguring_during_a_call_still_answers_it() -> None:
    configure_validation(ValidationBounds(seconds=2))
    tool = _bomb_tool()

    async def main() -> Any:
        call = asyncio.create_task(tool.call({"v": 1.5}))
        await asyncio.sleep(0.5)
        configure_validation(ValidationBounds(seconds=3))  # the running call keeps its 2 s
        return await call

    result = asyncio.run(main())
    assert result.failure is not None
    assert result.failure.detail == {
        "errors": [{"pointer": "", "message": "validation exceeded 2 s"}]
    }
