"""The forms share one options object; the composition root builds and passes the registry."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolproof.backends import CELERY, PROCESS, backend
from toolproof.config import extension_registry
from toolproof.extensions import (
    ExtensionKind,
    ExtensionOptions,
    ExtensionRegistry,
    extension,
    register_extension,
    transformer,
    wrapper,
)

HERE = Path(__file__).resolve().parent
FORMS = {
    "register_extension": register_extension,
    "extension": extension,
    "wrapper": wrapper,
    "transformer": transformer,
    "backend": backend,
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_takes_the_shared_options_once(form: str) -> None:
    parameters = inspect.signature(FORMS[form]).parameters
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD
    assert parameters["options"].annotation == "Unpack[ExtensionOptions]"
    assert not set(parameters) & set(ExtensionOptions.__annotations__)  # not repeated


def _factory(inner: Any, *, name: str, config: Any) -> Any:
    return inner


async def _passthrough(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
    return await call_next(arguments)


def _use(form: str) -> Any:
    registry = ExtensionRegistry(builtins=False)
    if form == "register_extension":
        return register_extension(_factory, kind="wrapper", name="t", registry=registry, confg=None)  # type: ignore[call-arg]
    if form == "extension":
        return extension(kind="wrapper", name="t", registry=registry, confg=None)  # type: ignore[call-arg]
    if form == "wrapper":
        return wrapper(name="t", registry=registry, confg=None)(_passthrough)  # type: ignore[call-overload]
    if form == "transformer":
        return transformer(name="t", input_schema={}, confg=None)  # type: ignore[call-arg]
    return backend(name="t", confg=None)  # type: ignore[call-arg]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_unknown_option_is_refused_naming_it(form: str) -> None:
    with pytest.raises(TypeError) as caught:
        _use(form)
    assert str(caught.value) == f"{form}() got an unexpected keyword argument 'confg'"


def test_the_shared_options_reach_the_extension() -> None:
    registry = ExtensionRegistry(builtins=False)
    ext = wrapper(
        name="tagged", version="3", description="one line", registry=registry, origin="here"
    )(_passthrough)
    assert (ext.kind, ext.version, ext.description, ext.origin) == (
        ExtensionKind.WRAPPER,
        "3",
        "one line",
        "here",
    )
    assert registry["tagged"] is ext


def test_importing_the_backends_registers_nothing() -> None:
    probe = (
        "import toolproof.backends\n"
        "from toolproof.extensions import ExtensionRegistry\n"
        "print(sorted({'process', 'celery'} & set(ExtensionRegistry().names())))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "[]\n"


def test_the_composition_root_registers_the_backends_in_its_registry() -> None:
    registry = extension_registry()
    assert registry is not extension_registry()  # built by the root on each call, never global
    assert registry["process"] is PROCESS and registry["celery"] is CELERY


def test_a_module_s_extensions_register_into_the_registry_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    registry = ExtensionRegistry(builtins=False)
    module = registry.import_module("ext_fixture_exts")
    assert registry.names() == ["fixture_double"]
    assert registry["fixture_double"] is module.fixture_double


def test_a_decorator_registers_nothing_by_itself() -> None:
    import toolproof.extensions

    ext = wrapper(name="marked_only")(_passthrough)
    assert ext.name == "marked_only"
    assert "marked_only" not in ExtensionRegistry()
    assert "marked_only" not in extension_registry()
    assert not hasattr(toolproof.extensions, "default_registry")  # no process-wide registry


def test_the_registry_a_toolset_was_bound_from_is_its_resource(tmp_path: Path) -> None:
    import asyncio

    from toolproof.config import EXTENSIONS, load_toolset

    (tmp_path / "toolproof.toml").write_text(
        '[extensions]\nmodules = ["ext_fixture_exts"]\n', encoding="utf-8"
    )

    async def go() -> list[str]:
        async with load_toolset(tmp_path / "toolproof.toml") as toolset:
            return toolset.resources[EXTENSIONS].names()

    sys.path.insert(0, str(HERE))
    try:
        names = asyncio.run(go())
    finally:
        sys.path.remove(str(HERE))
    assert "fixture_double" in names and "process" in names
    assert "fixture_double" not in extension_registry()
