"""The composition root: toolproof.toml -> sealed Toolset (config.py, [[python]] part)."""

from __future__ import annotations

import asyncio
import itertools
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolproof import ConfigError, ToolAnnotations, Toolset, load_toolset
from toolproof.config import load_config
from toolproof.tools.resources import CONFIG_PATH

_COUNTER = itertools.count()

TOOLS_MODULE = '''
from __future__ import annotations
import toolproof

@toolproof.tool(read_only=True)
def greet(name: str) -> str:
    """Say hello.

    Args:
        name: who to greet.
    """
    return f"hello {name}"

@toolproof.tool(name="shout", version="2")
async def loud(text: str) -> str:
    return text.upper()

@toolproof.tool
def spread(*args: int) -> int:
    return 0

def plain(x: int) -> int:
    return x
'''


def unique_module(tmp_path: Path, source: str = TOOLS_MODULE) -> str:
    name = f"tp_config_tools_{next(_COUNTER)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    return name


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(path: Path) -> Toolset:
    async def go() -> Toolset:
        async with load_toolset(path) as toolset:
            return toolset

    return asyncio.run(go())


def config_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load(path)
    return caught.value


def test_marked_functions_bind_and_the_rest_is_quarantined(tmp_path: Path) -> None:
    module = unique_module(tmp_path)
    toolset = load(write(tmp_path, f'[[python]]\nmodule = "{module}"\n'))
    assert toolset.sealed
    assert toolset.names() == ["greet", "shout"]
    assert toolset["greet"].spec.annotations == ToolAnnotations(readOnlyHint=True)
    assert toolset["greet"].spec.description == "Say hello."
    assert toolset["shout"].spec.version == "2"
    assert toolset.owner("greet") == f"python:{module}"
    assert [q.to_json() for q in toolset.quarantined] == [
        {
            "name": "spread",
            "field": "parameter 'args'",
            "rule": "bare *args/**kwargs cannot be described by a JSON Schema; "
            "declare every parameter",
            "owner": f"python:{module}",
        }
    ]
    assert toolset.resources[CONFIG_PATH] == str((tmp_path / "toolproof.toml").resolve())
    result = asyncio.run(toolset["shout"].call({"text": "hi"}))
    assert result.value == "HI"


def test_listed_functions_only_marked_or_not(tmp_path: Path) -> None:
    module = unique_module(tmp_path)
    toolset = load(
        write(tmp_path, f'[[python]]\nmodule = "{module}"\nfunctions = ["plain", "greet"]\n')
    )
    assert toolset.names() == ["greet", "plain"]


def test_path_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    module = unique_module(tmp_path / "lib")
    conf = tmp_path / "conf"
    conf.mkdir()
    toolset = load(write(conf, f'[[python]]\nmodule = "{module}"\npath = "../lib"\n'))
    assert toolset.names() == ["greet", "shout"]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    error = config_error(path)
    assert str(error) == f"{path}: (file): file not found"
    assert (error.file, error.key, error.rule) == (str(path), "(file)", "file not found")


def test_a_folder_given_as_the_config_is_named_as_a_folder(tmp_path: Path) -> None:
    error = config_error(tmp_path)
    assert str(error) == f"{tmp_path}: (file): is a folder; give the toolproof.toml file in it"


def test_bad_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "[[python]]\nmodule = \n")
    error = config_error(path)
    assert str(error) == (f"{path}: (file): not valid TOML: Invalid value (at line 2, column 10)")


@pytest.mark.parametrize(
    ("text", "key", "rule"),
    [
        ("colour = 1\n", "colour", "unknown key (not part of the toolproof.toml format)"),
        (
            '[[python]]\nmodule = "m"\nfunction = ["a"]\n',
            "python[0].function",
            "unknown key (not part of the toolproof.toml format); did you mean 'functions'?",
        ),
        ('[[python]]\nfunctions = ["a"]\n', "python[0].module", "required key is missing"),
        (
            '[[python]]\nmodule = ""\n',
            "python[0].module",
            "String should have at least 1 character",
        ),
        (
            "[[python]]\nmodule = 3\n",
            "python[0].module",
            "Input should be a valid string",
        ),
    ],
)
def test_format_errors_name_file_key_and_rule(
    tmp_path: Path, text: str, key: str, rule: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (caught.value.file, caught.value.key, caught.value.rule) == (str(path), key, rule)
    assert str(caught.value) == f"{path}: {key}: {rule}"


def test_module_that_does_not_exist(tmp_path: Path) -> None:
    path = write(tmp_path, '[[python]]\nmodule = "tp_no_such_module_anywhere"\n')
    assert str(config_error(path)) == (
        f"{path}: python[0].module: cannot import module 'tp_no_such_module_anywhere': "
        "ModuleNotFoundError: No module named 'tp_no_such_module_anywhere'"
    )


def test_module_that_fails_to_import(tmp_path: Path) -> None:
    module = unique_module(tmp_path, "raise RuntimeError('database is down')\n")
    path = write(tmp_path, f'[[python]]\nmodule = "{module}"\n')
    assert str(config_error(path)) == (
        f"{path}: python[0].module: cannot import module '{module}': RuntimeError: database is down"
    )


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit(3)"),
        ("raise SystemExit\n", "SystemExit(None)"),
        ("raise SystemExit('bye')\n", "SystemExit('bye')"),
    ],
)
def test_a_module_that_exits_at_import_is_a_config_error_naming_it(
    tmp_path: Path, source: str, shown: str
) -> None:
    module = unique_module(tmp_path, source)
    path = write(tmp_path, f'[[python]]\nmodule = "{module}"\n')
    assert str(config_error(path)) == (
        f"{path}: python[0].module: cannot import module '{module}': "
        f"{shown}: the module called sys.exit() while being imported"
    )


def test_a_module_that_raises_keyboardinterrupt_at_import_is_a_config_error(
    tmp_path: Path,
) -> None:
    module = unique_module(tmp_path, "raise KeyboardInterrupt\n")
    path = write(tmp_path, f'[[python]]\nmodule = "{module}"\n')
    assert str(config_error(path)) == (
        f"{path}: python[0].module: cannot import module '{module}': "
        "KeyboardInterrupt: the import was interrupted (SIGINT or a raise)"
    )


def test_an_extension_module_that_exits_at_import_is_quarantined_naming_it(
    tmp_path: Path,
) -> None:
    module = unique_module(tmp_path, "import sys\nsys.exit(3)\n")
    tools = unique_module(tmp_path)
    path = write(
        tmp_path, f'[[python]]\nmodule = "{tools}"\n[extensions]\nmodules = ["{module}"]\n'
    )
    [item] = [q for q in load(path).quarantined if q.name == module]
    assert (item.field, item.rule) == (
        "extensions.modules[0]",
        f"cannot import extension module '{module}': SystemExit(3): the module called "
        "sys.exit() while being imported",
    )


_DURATION = "is not a duration: seconds must be a finite number above 0 and at most 604800 (7 days)"
_MCP = '[[mcp]]\nname = "s"\ncommand = "x"\n'


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-inf", "-1", "0", "604801"])
@pytest.mark.parametrize("key", ["startup_timeout", "call_timeout"])
def test_an_absurd_mcp_timeout_is_refused_at_load_naming_key_and_rule(
    tmp_path: Path, key: str, value: str
) -> None:
    path = write(tmp_path, f"{_MCP}{key} = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    shown = repr(float(value))
    assert (caught.value.key, caught.value.rule) == (f"mcp[0].{key}", f"{shown} {_DURATION}")


def test_listed_function_that_does_not_exist(tmp_path: Path) -> None:
    module = unique_module(tmp_path)
    path = write(tmp_path, f'[[python]]\nmodule = "{module}"\nfunctions = ["greet", "nope"]\n')
    error = config_error(path)
    assert (error.key, error.rule) == (
        "python[0].functions[1]",
        f"module '{module}' has no function 'nope'",
    )


def test_same_tool_from_two_entries_names_both_owners(tmp_path: Path) -> None:
    first = unique_module(tmp_path)
    second = unique_module(tmp_path)
    path = write(
        tmp_path,
        f'[[python]]\nmodule = "{first}"\n\n[[python]]\nmodule = "{second}"\n',
    )
    error = config_error(path)
    assert error.key == "python[1]"
    assert error.rule == (
        f"tool name 'greet': is already taken: defined by python:{first} and again by "
        f"python:{second} (rule: tool names are unique in a Toolset)"
    )


def test_awaitable_form_leaves_closing_to_the_caller(tmp_path: Path) -> None:
    module = unique_module(tmp_path)
    path = write(tmp_path, f'[[python]]\nmodule = "{module}"\nfunctions = ["plain"]\n')

    async def go() -> Any:
        toolset = await load_toolset(path)
        try:
            return toolset.names()
        finally:
            await toolset.aclose()

    assert asyncio.run(go()) == ["plain"]


def test_a_marked_function_with_a_bad_name_is_quarantined(tmp_path: Path) -> None:
    module = unique_module(
        tmp_path,
        "import toolproof\n\n@toolproof.tool(name='bad name')\ndef f(x: int) -> int:\n"
        "    return x\n\n@toolproof.tool\ndef good(x: int) -> int:\n    return x\n",
    )
    toolset = load(write(tmp_path, f'[[python]]\nmodule = "{module}"\n'))
    assert toolset.names() == ["good"]
    assert [q.to_json() for q in toolset.quarantined] == [
        {
            "name": "bad name",
            "field": "name",
            "rule": "must match ^[A-Za-z0-9_.-]{1,64}$ (letters, digits, '_', '.', '-')",
            "owner": f"python:{module}",
        }
    ]


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ('[[python]]\nmodul = "m"\n', "python[0].modul", "; did you mean 'module'?"),
        (
            '[tools.add]\nextension = ["retry"]\n',
            "tools.add.extension",
            "; did you mean 'extensions'?",
        ),
        (
            "[[retrieval]]\ncorpus = 'c'\nmax_chunk = 9\n",
            "retrieval[0].max_chunk",
            "; did you mean 'max_chunk_bytes'?",
        ),
        ("colour = 1\n", "colour", ""),
    ],
)
def test_a_misspelt_key_is_named_with_the_closest_real_one(
    tmp_path: Path, text: str, key: str, hint: str
) -> None:
    error = config_error(write(tmp_path, text))
    assert (error.key, error.rule) == (
        key,
        "unknown key (not part of the toolproof.toml format)" + hint,
    )


@pytest.mark.parametrize(
    ("extension", "key", "value", "rule"),
    [
        ("timeout", "seconds", "inf", f"inf {_DURATION}"),
        ("timeout", "seconds", "1e308", f"1e+308 {_DURATION}"),
        ("process", "start_timeout", "-1", f"-1.0 {_DURATION}"),
        ("process", "timeout", "nan", f"nan {_DURATION}"),
        ("cache", "ttl", "0", f"0.0 {_DURATION}"),
        ("cache", "max_entries", "10000000000", "Input should be less than or equal to 1000000000"),
        (
            "retry",
            "backoff",
            "1e308",
            "1e+308 is not a delay: seconds must be a finite number from 0 to 604800 (7 days)",
        ),
        ("retry", "multiplier", "inf", "Input should be less than or equal to 100"),
        (
            "rate_limit",
            "rate",
            "nan",
            "nan is not a rate: per second, a finite number above 0 and at most 1e+06",
        ),
        ("rate_limit", "burst", "10000000000", "Input should be less than or equal to 1000000000"),
    ],
)
def test_an_absurd_extension_number_quarantines_the_variant_naming_key_and_rule(
    tmp_path: Path, extension: str, key: str, value: str, rule: str
) -> None:
    module = unique_module(tmp_path)
    base = "rate = 1, " if extension == "rate_limit" and key != "rate" else ""
    path = write(
        tmp_path,
        f'[[python]]\nmodule = "{module}"\n[tools.greet]\n'
        f'extensions = [{{name = "{extension}", config = {{{base}{key} = {value}}}}}]\n',
    )
    [item] = [q for q in load(path).quarantined if q.name == f"greet_{extension}"]
    assert item.rule == (
        f"cannot apply combo [{extension}] to tool 'greet': invalid config for extension "
        f"{extension!r}: {key}: {rule}"
    )
