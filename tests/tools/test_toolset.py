"""The sealed inventory of tools (tools/toolset.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolproof import Tool, ToolNameError, Toolset, ToolsetSealedError, load_toolset
from toolproof.tools.toolset import TOOL_NAME_RE, check_tool_name


def add(a: int, b: int = 1) -> int:
    return a + b


def named(name: str) -> Tool:
    base = Tool.from_function(add)
    return Tool(base.spec.model_copy(update={"name": name}), base.run_validated, source=base.source)


def test_lookup_and_listing() -> None:
    toolset = Toolset()
    for name in ("zeta", "alpha", "mid.dle-1_x"):
        toolset.add(named(name), owner=f"python:{name}")
    toolset.seal()
    assert toolset.names() == ["alpha", "mid.dle-1_x", "zeta"]
    assert [tool.name for tool in toolset] == ["alpha", "mid.dle-1_x", "zeta"]
    assert len(toolset) == 3
    assert "alpha" in toolset
    assert "beta" not in toolset
    assert toolset["alpha"].name == "alpha"
    assert toolset.get("beta") is None
    assert toolset.owner("zeta") == "python:zeta"
    with pytest.raises(KeyError) as caught:
        toolset["beta"]
    assert caught.value.args[0] == (
        "no tool named 'beta' in this toolset (known: alpha, mid.dle-1_x, zeta)"
    )
    result = asyncio.run(toolset["alpha"].call({"a": 2}))
    assert result.value == 3


def test_late_registration_is_refused() -> None:
    toolset = Toolset()
    toolset.add(named("first"))
    assert toolset.seal() is toolset
    assert toolset.sealed
    with pytest.raises(ToolsetSealedError) as caught:
        toolset.add(named("late"))
    assert str(caught.value) == (
        "toolset is sealed: cannot add tool 'late' after seal() "
        "(rule: tools are registered at the composition root, before sealing)"
    )
    assert caught.value.tool == "late"
    with pytest.raises(ToolsetSealedError):
        toolset.quarantine("late", "input_schema", "bad")
    assert toolset.names() == ["first"]


@pytest.mark.parametrize(
    "name",
    ["", "has space", "x" * 65, "ünïcode", "a/b", "semi;colon", "tab\t", "new\nline", "trailing\n"],
)
def test_bad_names_are_refused(name: str) -> None:
    toolset = Toolset()
    with pytest.raises(ToolNameError) as caught:
        toolset.add(named(name))
    assert str(caught.value) == (
        f"tool name {name!r}: must match ^[A-Za-z0-9_.-]{{1,64}}$ (letters, digits, '_', '.', '-')"
    )
    assert len(toolset) == 0


@pytest.mark.parametrize("name", ["a", "x" * 64, "A.b-c_9", "git_log", "0"])
def test_good_names_are_accepted(name: str) -> None:
    toolset = Toolset()
    toolset.add(named(name))
    assert toolset.names() == [name]


def test_duplicate_name_names_both_owners() -> None:
    toolset = Toolset()
    toolset.add(named("add"), owner="python:pkg.one")
    with pytest.raises(ToolNameError) as caught:
        toolset.add(named("add"), owner="mcp:git")
    assert str(caught.value) == (
        "tool name 'add': is already taken: defined by python:pkg.one and again by mcp:git "
        "(rule: tool names are unique in a Toolset)"
    )
    assert toolset.owner("add") == "python:pkg.one"


def test_owner_defaults_to_the_tool_source() -> None:
    toolset = Toolset()
    toolset.add(named("add"))
    assert toolset.owner("add") == f"python:{__name__}.add"


def test_tool_name_pattern_has_no_trailing_newline_loophole() -> None:
    assert check_tool_name("ok") == "ok"
    with pytest.raises(ToolNameError):
        check_tool_name("ok\n")
    assert TOOL_NAME_RE.match("ok\n") is None


def test_quarantine_is_recorded_in_order() -> None:
    toolset = Toolset()
    toolset.quarantine("bad", "parameter 'args'", "no *args", owner="python:m")
    toolset.quarantine("worse", "input_schema", "does not compile")
    assert [q.to_json() for q in toolset.seal().quarantined] == [
        {"name": "bad", "field": "parameter 'args'", "rule": "no *args", "owner": "python:m"},
        {"name": "worse", "field": "input_schema", "rule": "does not compile", "owner": ""},
    ]


def test_close_runs_callbacks_last_first_once() -> None:
    calls: list[str] = []

    def record(text: str):  # type: ignore[no-untyped-def]
        async def callback() -> None:
            calls.append(text)

        return callback

    async def scenario() -> None:
        async with Toolset() as toolset:
            toolset.on_close(record("first"))
            toolset.on_close(record("second"))
        await toolset.aclose()

    asyncio.run(scenario())
    assert calls == ["second", "first"]


def test_descriptor_lists_every_tool_sorted_and_is_cached_once_sealed() -> None:
    toolset = Toolset()
    toolset.add(named("b"))
    toolset.add(named("a"))
    open_descriptor = toolset.descriptor()
    assert [d.name for d in open_descriptor.tools] == ["a", "b"]
    sealed = toolset.seal().descriptor()
    assert sealed == open_descriptor
    assert toolset.descriptor() is sealed
    assert sealed.digest.startswith("sha256:")
    assert len(sealed.digest) == 7 + 64


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence" / "toolproof.toml"

DIGEST_SCRIPT = """
import asyncio, sys
import toolproof
import toolset_fixture_tools as m

async def main():
    async with toolproof.load_toolset(sys.argv[1]) as example:
        first = example.descriptor().digest
    toolset = toolproof.Toolset()
    for fn in (m.stock_level, m.tag_set, m.add):
        toolset.add(toolproof.Tool.from_function(fn), owner="python:toolset_fixture_tools")
    print(first, toolset.seal().descriptor().digest)

asyncio.run(main())
"""

FIXTURE_TOOLS = '''
from __future__ import annotations
import enum
from typing import Literal
from pydantic import BaseModel
import toolproof

class Mode(enum.Enum):
    A = "a"
    B = "b"
    C = "c"

class Box(BaseModel):
    zeta: int
    alpha: list[str]
    mode: Mode = Mode.B

@toolproof.tool(read_only=True)
def stock_level(item: Literal["apple", "pear", "plum"], box: Box | None = None) -> dict[str, int]:
    """How many items there are.

    Args:
        item: the item.
        box: a box.
    """
    return {item: 1}

def tag_set(tags: set[str] = {"x", "y", "z", "w"}, *, mode: Mode = Mode.C) -> list[str]:
    return sorted(tags)

async def add(a: int, b: float = 0.5) -> float:
    return a + b
'''


def test_descriptor_digest_is_equal_across_hash_seeds(tmp_path: Path) -> None:
    (tmp_path / "toolset_fixture_tools.py").write_text(FIXTURE_TOOLS, encoding="utf-8")
    outputs = []
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(tmp_path)}
        done = subprocess.run(
            [sys.executable, "-c", DIGEST_SCRIPT, str(EXAMPLE)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.split())
    assert outputs[0] == outputs[1] == outputs[2]
    assert all(digest.startswith("sha256:") for digest in outputs[0])

    async def here() -> str:
        async with load_toolset(EXAMPLE) as toolset:
            return toolset.descriptor().digest

    assert asyncio.run(here()) == outputs[0][0]
