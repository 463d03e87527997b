"""A signature pydantic cannot build a model of quarantines that one tool, never the load.

``typing.TypedDict`` as a parameter or return annotation is refused by pydantic on
Python < 3.12 ("Please use typing_extensions.TypedDict"); an arbitrary class is refused
on every version. Either is a :class:`ToolBindError` naming the parameter and carrying
pydantic's own words, and loading quarantines the tool while the others bind.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import TypedDict

import pytest

from toolproof import load_toolset
from toolproof.errors import ToolBindError
from toolproof.tools.tool import Tool

TYPED_DICT_REFUSED = sys.version_info < (3, 12)
TYPED_DICT_RULE = (
    "pydantic cannot build a model of it: Please use `typing_extensions.TypedDict` "
    "instead of `typing.TypedDict` on Python < 3.12."
)
OPAQUE_RULE = (
    "pydantic cannot build a model of it: Unable to generate pydantic-core schema for "
    "<class '{module}.Opaque'>. Set `arbitrary_types_allowed=True` in the model_config "
    "to ignore this error or implement `__get_pydantic_core_schema__` on your type to "
    "fully support it."
)


class Point(TypedDict):
    x: int


MODULE = """
from typing import TypedDict


class Point(TypedDict):
    x: int


class Opaque:
    pass


def good(a: int) -> int:
    return a


def takes_point(label: str, p: Point) -> int:
    return p["x"]


def gives_point() -> Point:
    return {"x": 1}


def takes_opaque(o: Opaque) -> int:
    return 1
"""


def test_each_unbuildable_tool_is_quarantined_and_the_others_bind(tmp_path: Path) -> None:
    module = f"unbuildable_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(MODULE, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    functions = '["good", "takes_point", "gives_point", "takes_opaque"]'
    config.write_text(
        f'[[python]]\nmodule = "{module}"\npath = "."\nfunctions = {functions}\n',
        encoding="utf-8",
    )

    async def main() -> None:
        async with load_toolset(config) as toolset:
            assert (await toolset["good"].call({"a": 2})).value == 2
            found = {q.name: (q.field, q.rule, q.owner) for q in toolset.quarantined}
            owner = f"python:{module}"
            assert found["takes_opaque"] == (
                "parameters.o",
                OPAQUE_RULE.format(module=module),
                owner,
            )
            if TYPED_DICT_REFUSED:
                assert toolset.names() == ["good"]
                assert found["takes_point"] == ("parameters.p", TYPED_DICT_RULE, owner)
                assert found["gives_point"] == ("return annotation", TYPED_DICT_RULE, owner)
            else:  # pydantic builds typing.TypedDict on 3.12+
                assert toolset.names() == ["gives_point", "good", "takes_point"]

    asyncio.run(main())


@pytest.mark.skipif(not TYPED_DICT_REFUSED, reason="pydantic accepts typing.TypedDict on 3.12+")
def test_binding_a_typed_dict_parameter_is_a_tool_bind_error() -> None:
    def takes_point(label: str, p: Point) -> int:
        return p["x"]

    with pytest.raises(ToolBindError) as caught:
        Tool.from_function(takes_point)
    assert (caught.value.tool, caught.value.field, caught.value.rule) == (
        "takes_point",
        "parameters.p",
        TYPED_DICT_RULE,
    )
