"""The failure vocabulary: every kind produced is in FailureKind, documented, and mapped once."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

import toolproof
from toolproof.contract.tools import ToolFailure, ToolResult
from toolproof.errors import ToolCallError, error_mapping
from toolproof.extensions.wrappers.retry import DEFAULT_RETRY_ON
from toolproof.failures import (
    FAILURE_TABLE,
    FailureKind,
    FailureKindName,
    FailureWhere,
    FailureWhereName,
)
from toolproof.identity import canonical_json

SRC = Path(toolproof.__file__).parent
DOCS = SRC.parents[1] / "docs" / "failures.md"
_BUILDERS = {"fail", "ToolFailure", "_failure", "_http_failure", "FailureRule"}


def _produced() -> tuple[set[str], set[str]]:
    """Every literal kind and where handed to a failure builder anywhere in src."""
    kinds: set[str] = set()
    wheres: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in _BUILDERS:
                continue
            args = {f"#{i}": arg for i, arg in enumerate(node.args)}
            args |= {kw.arg or "": kw.value for kw in node.keywords}
            for key, value in args.items():
                if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                    continue
                first = "#2" if name == "_http_failure" else "#0"
                if key in ("kind", first):
                    kinds.add(value.value)
                elif key == "where" or (key == "#1" and name == "FailureRule"):
                    wheres.add(value.value)
    return kinds, wheres


def test_every_kind_produced_is_a_member_and_every_member_is_produced() -> None:
    kinds, wheres = _produced()
    members = {kind.value for kind in FailureKind}
    assert kinds - members == set()
    assert wheres - {where.value for where in FailureWhere} == set()
    others = [path for path in SRC.rglob("*.py") if path.stem != "failures"]
    used = "\n".join(path.read_text(encoding="utf-8") for path in others)
    unused = {
        kind.value
        for kind in FailureKind
        if kind.value not in kinds and f"FailureKind.{kind.name}" not in used
    }
    assert unused == set()


def test_the_table_and_the_literal_names_hold_exactly_the_members() -> None:
    assert set(FAILURE_TABLE) == set(FailureKind)
    assert set(get_args(FailureKindName)) == {kind.value for kind in FailureKind}
    assert set(get_args(FailureWhereName)) == {where.value for where in FailureWhere}


def test_every_kind_and_where_is_documented_with_the_table_values() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for kind, mapping in FAILURE_TABLE.items():
        retried = "yes" if mapping.retried else "no"
        row = f"| `{kind}` | {mapping.meaning} | {retried} | {mapping.http_status} |"
        assert f"{row} {mapping.mcp_code} |" in text
    for where in FailureWhere:
        assert f"| `{where}` |" in text


def test_retry_default_is_the_table() -> None:
    assert tuple(k.value for k, m in FAILURE_TABLE.items() if m.retried) == DEFAULT_RETRY_ON
    retried = ("tool_error", "timeout", "worker", "transport", "backend", "unavailable")
    assert retried == DEFAULT_RETRY_ON


def test_the_stored_fields_are_the_enums_and_their_json_the_strings() -> None:
    failure = ToolResult.fail("timeout", "late", where="wrapper", retryable=True).failure
    assert failure is not None
    assert failure.kind is FailureKind.TIMEOUT
    assert failure.where is FailureWhere.WRAPPER
    assert failure.to_json()["kind"] == "timeout"
    assert type(failure.to_json()["kind"]) is str
    assert canonical_json(failure.to_json()) == (
        b'{"detail":{},"kind":"timeout","message":"late","retryable":true,'
        b'"schema_version":1,"where":"wrapper"}'
    )
    assert ToolFailure.model_validate(failure.to_json()) == failure
    with pytest.raises(ValidationError):
        ToolFailure.model_validate({**failure.to_json(), "kind": "nope"})


@pytest.mark.parametrize("kind", list(FailureKind))
def test_a_tool_call_error_is_reported_by_its_kind(kind: FailureKind) -> None:
    mapping = error_mapping(ToolCallError(ToolFailure(kind=kind, message="m")))
    assert (mapping.code, mapping.exit_code) == ("tool-call", 1)
    assert (mapping.http_status, mapping.mcp_code) == (
        FAILURE_TABLE[kind].http_status,
        FAILURE_TABLE[kind].mcp_code,
    )
