"""Wire models of tools: frozen, closed, versioned, content-addressed (contract/tools.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pydantic import ValidationError

from toolproof import (
    CanonicalizationError,
    IdentityMismatchError,
    ToolAnnotations,
    ToolCall,
    ToolCallError,
    ToolFailure,
    ToolResult,
    ToolSpec,
    canonical_json,
)
from toolproof.contract import SCHEMA_VERSION, StackLayer, ToolDescriptor, ToolsetDescriptor

SPEC = ToolSpec(name="add", input_schema={"type": "object"})


def test_models_are_frozen() -> None:
    with pytest.raises(ValidationError, match="Instance is frozen"):
        SPEC.name = "other"  # type: ignore[misc]
    failure = ToolFailure(kind="tool_error", message="boom")
    with pytest.raises(ValidationError, match="Instance is frozen"):
        failure.kind = "timeout"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (ToolSpec, {"name": "add", "input_schema": {}, "inputSchema": {}}),
        (ToolFailure, {"kind": "tool_error", "message": "m", "type": "x"}),
        (ToolResult, {"ok": True, "value": 1, "extra": 1}),
        (ToolCall, {"tool": "add", "arguments": {}, "when": "now"}),
        (ToolAnnotations, {"readOnly": True}),
    ],
)
def test_extra_fields_are_forbidden(model: Any, data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    errors = caught.value.errors()
    assert [(e["type"], e["loc"]) for e in errors] == [("extra_forbidden", (list(data)[-1],))]


@pytest.mark.parametrize("version", [0, 2])
def test_wrong_schema_version_is_refused(version: int) -> None:
    with pytest.raises(ValidationError) as caught:
        ToolSpec.model_validate({"name": "add", "input_schema": {}, "schema_version": version})
    assert caught.value.errors()[0]["msg"] == (
        f"Value error, schema_version {version} is not supported (this toolproof reads version 1)"
    )
    assert SPEC.schema_version == SCHEMA_VERSION == 1


def test_spec_canonical_bytes() -> None:
    assert SPEC.canonical() == (
        b'{"annotations":{"destructiveHint":null,"idempotentHint":null,"openWorldHint":null,'
        b'"readOnlyHint":null,"schema_version":1,"title":null},"description":"",'
        b'"input_schema":{"type":"object"},"name":"add","output_schema":null,'
        b'"schema_version":1,"version":"0"}'
    )


def test_annotation_defaults_follow_mcp() -> None:
    unstated = ToolAnnotations()
    assert (
        unstated.is_read_only,
        unstated.is_destructive,
        unstated.is_idempotent,
        unstated.is_open_world,
    ) == (False, True, False, True)
    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    assert (
        read_only.is_read_only,
        read_only.is_destructive,
        read_only.is_idempotent,
        read_only.is_open_world,
    ) == (True, False, True, False)


def test_result_success_and_unwrap() -> None:
    result = ToolResult.success({"n": 1})
    assert (result.ok, result.value, result.failure, result.unwrap()) == (
        True,
        {"n": 1},
        None,
        {"n": 1},
    )


def test_result_failure_unwrap_raises_tool_call_error() -> None:
    result = ToolResult.fail("timeout", "took longer than 2 s", where="wrapper", retryable=True)
    assert result.failure == ToolFailure(
        kind="timeout", message="took longer than 2 s", retryable=True, where="wrapper"
    )
    assert result.failure.type == "timeout"
    with pytest.raises(ToolCallError) as caught:
        result.unwrap()
    assert str(caught.value) == "timeout: took longer than 2 s"
    assert caught.value.failure is result.failure


@pytest.mark.parametrize(
    "data",
    [
        {"ok": True, "value": 1, "failure": {"kind": "tool_error", "message": "m"}},
        {"ok": False, "value": None},
    ],
)
def test_result_has_failure_exactly_when_not_ok(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as caught:
        ToolResult.model_validate(data)
    assert caught.value.errors()[0]["msg"] == (
        "Value error, a ToolResult has a failure exactly when ok is False"
    )


def test_result_round_trips_through_json() -> None:
    result = ToolResult.fail("invalid_arguments", "bad", where="arguments", detail={"errors": []})
    back = ToolResult.model_validate_json(result.model_dump_json())
    assert back == result
    assert back.canonical() == result.canonical()


def test_call_content_id() -> None:
    call = ToolCall(tool="add", arguments={"b": 2, "a": 1})
    content = {"arguments": {"a": 1, "b": 2}, "schema_version": 1, "step": None, "tool": "add"}
    assert call.id == "call_" + hashlib.sha256(canonical_json(content)).hexdigest()
    assert ToolCall.model_validate_json(call.model_dump_json()) == call


def test_call_with_tampered_content_is_refused_naming_both_ids() -> None:
    call = ToolCall(tool="add", arguments={"a": 1})
    data = json.loads(call.model_dump_json())
    data["arguments"]["a"] = 2
    computed = ToolCall(tool="add", arguments={"a": 2}).id
    with pytest.raises(IdentityMismatchError) as caught:
        ToolCall.model_validate_json(json.dumps(data))
    assert str(caught.value) == (
        f"call id mismatch: stored id {call.id} but content hashes to {computed} "
        "(rule: a content id is the digest of the canonical JSON of the content)"
    )
    assert (caught.value.kind, caught.value.stored, caught.value.computed) == (
        "call",
        call.id,
        computed,
    )


def test_toolset_descriptor_read_back_checks_its_id() -> None:
    descriptor = ToolsetDescriptor(tools=[ToolDescriptor.for_spec(SPEC, source="python:m.add")])
    assert descriptor.digest == "sha256:" + descriptor.id.removeprefix("toolset_")
    text = descriptor.model_dump_json()
    assert ToolsetDescriptor.model_validate_json(text) == descriptor
    forged = json.loads(text)
    forged["tools"][0]["version"] = "9"
    with pytest.raises(IdentityMismatchError) as caught:
        ToolsetDescriptor.model_validate(forged)
    assert caught.value.stored == descriptor.id
    assert caught.value.computed.startswith("toolset_")
    assert caught.value.computed != descriptor.id
    assert f"stored id {descriptor.id} but content hashes to {caught.value.computed}" in str(
        caught.value
    )


def test_descriptor_fingerprint_covers_spec_source_and_stack() -> None:
    base = ToolDescriptor.for_spec(SPEC, source="python:m.add")
    layer = StackLayer(name="retry", kind="wrapper", config_digest="sha256:" + "0" * 64)
    variants = [
        ToolDescriptor.for_spec(
            SPEC.model_copy(update={"description": "x"}), source="python:m.add"
        ),
        ToolDescriptor.for_spec(SPEC, source="python:m.other"),
        ToolDescriptor.for_spec(SPEC, source="python:m.add", base="add", stack=[layer]),
        ToolDescriptor.for_spec(SPEC, source="python:m.add", deterministic=False, varies=["clock"]),
    ]
    fingerprints = {base.fingerprint, *(v.fingerprint for v in variants)}
    assert len(fingerprints) == 5
    assert ToolDescriptor.for_spec(SPEC, source="python:m.add") == base
    assert (base.name, base.version, base.base, base.stack) == ("add", "0", None, [])


def test_canonical_refuses_non_finite_values_instead_of_writing_null() -> None:
    result = ToolResult.success({"a": [1.0, float("inf")]})
    with pytest.raises(CanonicalizationError) as caught:
        result.canonical()
    assert caught.value.path == "$.value.a[1]"
    spec = ToolSpec(name="x", input_schema={"default": float("nan")})
    with pytest.raises(CanonicalizationError) as caught:
        spec.canonical()
    assert caught.value.path == "$.input_schema.default"
