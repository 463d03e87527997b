"""ExtensionKind: values and every property of every kind (DESIGN.md section 5 table)."""

from __future__ import annotations

import pytest

from toolproof import ExtensionKind

TABLE = {
    # kind: multiple, preserves_schema, declares_schema, preserves_output_shape, relocates
    "wrapper": (True, True, False, True, False),
    "transformer": (True, False, True, False, False),
    "backend": (False, False, False, True, True),
}


def test_members_are_the_three_kinds() -> None:
    assert [kind.value for kind in ExtensionKind] == ["wrapper", "transformer", "backend"]
    assert ExtensionKind("backend") is ExtensionKind.BACKEND
    assert str(ExtensionKind.WRAPPER) == "wrapper"


@pytest.mark.parametrize("kind", list(TABLE))
def test_properties(kind: str) -> None:
    member = ExtensionKind(kind)
    assert (
        member.multiple,
        member.preserves_schema,
        member.declares_schema,
        member.preserves_output_shape,
        member.relocates_execution,
    ) == TABLE[kind]


def test_schema_rules_are_exclusive() -> None:
    for kind in ExtensionKind:
        assert not (kind.preserves_schema and kind.declares_schema)
