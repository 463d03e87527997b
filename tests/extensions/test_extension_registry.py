"""Registration: names, reserved params, configs, modules, duplicates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from ext_support import make_tool
from pydantic import BaseModel

from toolproof import ExtensionError, ExtensionKind, Tool, extension
from toolproof.extensions import (
    Extension,
    ExtensionRegistry,
    register_extension,
    wrapper,
)
from toolproof.identity import digest_json


def factory(inner: Tool, *, name: str, config: Any) -> Tool:
    return Tool(inner.spec.model_copy(update={"name": name}), inner.run_validated)


def test_builtins_are_registered() -> None:
    registry = ExtensionRegistry()
    assert [(ext.name, str(ext.kind)) for ext in registry] == [
        ("approve", "wrapper"),
        ("args", "transformer"),
        ("audit", "wrapper"),
        ("cache", "wrapper"),
        ("project", "transformer"),
        ("rate_limit", "wrapper"),
        ("retry", "wrapper"),
        ("timeout", "wrapper"),
    ]
    assert ExtensionRegistry(builtins=False).names() == []
    assert dict(registry["timeout"].reserved_params)["timeout_s"]["type"] == "number"


def test_decorator_and_function_forms() -> None:
    registry = ExtensionRegistry(builtins=False)

    class Config(BaseModel):
        level: int = 1

    @extension(kind=ExtensionKind.WRAPPER, name="deco", config=Config, registry=registry)
    def deco(inner: Tool, *, name: str, config: Any) -> Tool:
        """Decorated."""
        return factory(inner, name=name, config=config)

    ext = register_extension(factory, kind="backend", name="func", registry=registry)
    assert isinstance(deco, Extension)
    assert (deco.kind, deco.config, deco.description, deco.requires_body_locality) == (
        ExtensionKind.WRAPPER,
        Config,
        "Decorated.",
        False,
    )
    assert ext.kind is ExtensionKind.BACKEND
    assert registry.names() == ["deco", "func"]


def test_registering_a_name_twice_is_an_error() -> None:
    registry = ExtensionRegistry()
    with pytest.raises(ExtensionError) as info:
        register_extension(factory, kind="wrapper", name="retry", registry=registry)
    assert info.value.message == (
        "extension 'retry' is already registered (by builtin); extension names are unique"
    )
    ext = registry["retry"]
    assert registry.register(ext) is ext


@pytest.mark.parametrize("name", ["", "1abc", "has space", "x" * 33, "a/b"])
def test_bad_extension_names(name: str) -> None:
    with pytest.raises(ExtensionError) as info:
        register_extension(factory, kind="wrapper", name=name, register=False)
    assert info.value.message == (
        f"extension name {name!r}: must match ^[A-Za-z][A-Za-z0-9_.-]{{0,31}}$"
    )


@pytest.mark.parametrize("kind", ["transformer", "backend"])
def test_reserved_params_only_on_schema_preserving_kinds(kind: str) -> None:
    with pytest.raises(ExtensionError) as info:
        register_extension(factory, kind=kind, name="r", reserved_params=["x"], register=False)
    assert info.value.message == (
        f"extension 'r': reserved params are for kinds that preserve the input schema, not {kind}"
    )


def test_config_digest_covers_the_validated_config() -> None:
    ext = ExtensionRegistry()["retry"]
    config, config_digest = ext.parse_config({"attempts": 2})
    assert config.attempts == 2
    assert config_digest == digest_json(config.model_dump(mode="json"))
    plain = register_extension(factory, kind="wrapper", name="plain", register=False)
    assert plain.parse_config(None) == (None, digest_json({}))
    assert plain.parse_config({}) == (None, digest_json({}))


def test_wrapper_form_declares_and_strips_reserved_params() -> None:
    registry = ExtensionRegistry(builtins=False)
    seen: list[Any] = []

    @wrapper(name="loud", reserved_params={"loud": {"type": "boolean"}}, registry=registry)
    async def loud(call_next: Any, arguments: Any, config: Any) -> Any:
        seen.append(dict(arguments))
        result = await call_next(arguments)
        return result.value * (10 if arguments.get("loud") else 1)

    from ext_support import Recorder, elements, run

    from toolproof.extensions import build_combo

    body = Recorder()
    [(_, variant)] = build_combo(make_tool(body=body), elements("loud"), registry=registry)
    assert variant.spec.input_schema["properties"]["loud"] == {"type": "boolean"}
    assert run(variant.call({"a": 4, "loud": True})).value == 40
    assert seen == [{"a": 4, "loud": True}]
    assert body.calls == [{"a": 4}]


def test_import_module_failure_leaves_nothing_registered(tmp_path: Path) -> None:
    (tmp_path / "half_ext.py").write_text(
        "import toolproof\n"
        "@toolproof.wrapper(name='half_one')\n"
        "async def half_one(call_next, arguments, config):\n"
        "    return await call_next(arguments)\n"
        "raise RuntimeError('second half broke')\n",
        encoding="utf-8",
    )
    registry = ExtensionRegistry()
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ExtensionError) as info:
            registry.import_module("half_ext")
    finally:
        sys.path.remove(str(tmp_path))
    assert info.value.message == (
        "cannot import extension module 'half_ext': RuntimeError: second half broke"
    )
    assert "half_one" not in registry
