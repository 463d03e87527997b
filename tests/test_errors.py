"""The one error mapping (errors.py): every class maps, codes are unique, adapters agree."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, ValidationError

import toolproof
from toolproof import ToolFailure, errors
from toolproof.adapters.cli.app import report_error
from toolproof.adapters.http.problems import install_problem_handlers
from toolproof.adapters.mcp.server import mcp_error
from toolproof.errors import (
    ERROR_TABLE,
    UNKNOWN_ERROR,
    ConfigError,
    ExtensionError,
    InputError,
    ReplayRefused,
    ToolproofError,
    UsageError,
    VerificationError,
    error_mapping,
    mapping_for,
    validation_problem,
)

_OPTIONAL = ("langchain", "pydantic_ai", "openai_agents", "celery", "otel", "viewer", "llm")


def _all_error_classes() -> set[type[BaseException]]:
    """Every subclass of the two roots defined anywhere in the package."""
    for module in pkgutil.walk_packages(toolproof.__path__, "toolproof."):
        if module.name.endswith("__main__") or any(part in module.name for part in _OPTIONAL):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an optional framework that is not installed
            continue
    found: set[type[BaseException]] = set()
    stack: list[type[BaseException]] = [ToolproofError, UsageError]
    while stack:
        cls = stack.pop()
        if cls.__module__.startswith("toolproof"):
            found.add(cls)
        stack.extend(cls.__subclasses__())
    return found


def _instance(cls: type[BaseException]) -> Any:
    if cls is errors.ToolCallError:
        return cls(ToolFailure(kind="tool_error", message="boom"))
    if cls is errors.RecordingError:
        return cls("message", path="runs/x")
    if cls is errors.RefError:
        return cls("message", ref="$steps.a.value")
    for args in ((), ("message",), ("a", "b"), ("a", "b", "c")):
        try:
            return cls(*args)
        except TypeError:
            continue
    raise AssertionError(f"cannot build {cls}")


def test_every_error_class_of_the_package_is_in_the_table() -> None:
    classes = _all_error_classes()
    assert classes - set(ERROR_TABLE) == set()
    assert set(ERROR_TABLE) <= classes


def test_codes_are_unique_and_stable() -> None:
    codes = [mapping.code for mapping in ERROR_TABLE.values()]
    assert len(codes) == len(set(codes))
    assert UNKNOWN_ERROR.code not in codes
    assert {cls.__name__: m.code for cls, m in ERROR_TABLE.items()} == {
        "UsageError": "usage",
        "ToolsetSealedError": "toolset-sealed",
        "ToolproofError": "toolproof",
        "InputError": "input",
        "CanonicalizationError": "canonicalization",
        "IdentityMismatchError": "identity-mismatch",
        "ConfigError": "config",
        "ToolBindError": "tool-bind",
        "ExtensionError": "extension",
        "ToolNameError": "tool-name",
        "RefError": "ref",
        "ToolCallError": "tool-call",
        "BackendError": "backend",
        "ProtocolError": "protocol",
        "RecordingError": "recording",
        "AuthenticationError": "unauthorized",
        "VerificationError": "verification",
        "ReplayRefused": "replay-refused",
    }


def test_the_most_specific_class_wins_by_mro() -> None:
    class Custom(ConfigError):
        pass

    class Mixed(VerificationError, InputError):
        pass

    assert mapping_for(Custom) is ERROR_TABLE[ConfigError]
    assert mapping_for(Mixed) is ERROR_TABLE[VerificationError]
    assert mapping_for(KeyError) is UNKNOWN_ERROR
    assert (mapping_for(VerificationError).exit_code, mapping_for(ReplayRefused).exit_code) == (
        2,
        2,
    )
    assert mapping_for(InputError).exit_code == 1


def _http_answer(error: ToolproofError) -> httpx.Response:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise error

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/boom")

    return asyncio.run(call())


@pytest.mark.parametrize(
    "cls", sorted((c for c in ERROR_TABLE if issubclass(c, ToolproofError)), key=str)
)
def test_cli_http_and_mcp_agree_on_every_class(
    cls: type[ToolproofError], capsys: pytest.CaptureFixture[str]
) -> None:
    error = _instance(cls)
    mapping = error_mapping(error)
    assert report_error(error) == mapping.exit_code
    assert capsys.readouterr().err.startswith("error: ")
    answer = _http_answer(error)
    assert (answer.status_code, answer.json()["error"]) == (mapping.http_status, mapping.code)
    rpc = mcp_error(error)
    assert (rpc.error.code, rpc.error.data["error"]) == (mapping.mcp_code, mapping.code)


def test_validation_problem_gives_the_first_problem_in_pieces() -> None:
    class Model(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str
        size: int = 0

    with pytest.raises(ValidationError) as info:
        Model.model_validate({"size": "x", "nmae": "a"})
    first = validation_problem(info.value)
    assert (first.where, first.kind) == ("name", "missing")
    typo = validation_problem(info.value, prefer="extra_forbidden")
    assert (typo.loc, typo.message) == (("nmae",), "Extra inputs are not permitted")
    with pytest.raises(ValidationError) as whole:
        Model.model_validate([1])
    assert validation_problem(whole.value, empty="(document)").where == "(document)"


def test_fields_are_typed_attributes_and_the_fields_the_adapters_report() -> None:
    error = ExtensionError("two retry extensions", tool="add", combo=["retry", "retry"])
    assert (error.rule, error.tool, error.combo, error.extension) == (
        "two retry extensions",
        "add",
        ("retry", "retry"),
        None,
    )
    assert error.message == "two retry extensions"
    assert error.fields == {"rule": "two retry extensions", "tool": "add", "combo": ["retry"] * 2}
    refused = ReplayRefused("refused", rule="call", event=3)
    assert (refused.rule, refused.event, refused.step) == ("call", 3, None)
    assert refused.fields == {"rule": "call", "event": 3}
    assert not hasattr(InputError("bad", path="x"), "path")  # a free field is in .fields only
