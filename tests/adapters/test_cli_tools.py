"""``toolproof tools list|show`` and ``--version``, run as the real console script."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolproof
from toolproof import canonical_json, load_toolset

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool-evidence" / "toolproof.toml"
SCRIPT = Path(sys.executable).parent / "toolproof"


def cli(*args: str, seed: str = "0", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "COLUMNS": "200"}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, env=env, cwd=cwd, check=False, timeout=60
    )


def in_process() -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with load_toolset(EXAMPLE) as toolset:
            return {
                "digest": toolset.descriptor().digest,
                "tools": {tool.name: tool for tool in toolset},
            }

    return asyncio.run(go())


def test_version() -> None:
    done = cli("--version")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"toolproof {toolproof.__version__}\n".encode(),
        b"",
    )


def test_tools_list_json_is_one_canonical_document() -> None:
    done = cli("tools", "list", "--json", "--config", str(EXAMPLE), seed="123")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert done.stdout == canonical_json(document) + b"\n"
    here = in_process()
    annotations = {"idempotentHint": True, "openWorldHint": False, "readOnlyHint": True}
    assert document == {
        "descriptor_digest": here["digest"],
        "quarantined": [],
        "tools": [
            {
                "name": name,
                "version": "0",
                "description": here["tools"][name].spec.description,
                "owner": "python:evidence_tools",
                "base": None,
                "stack": [],
                "fingerprint": here["tools"][name].descriptor().fingerprint,
                "annotations": annotations,
            }
            for name in ("stock", "total")
        ],
    }
    assert document["tools"][0]["description"].startswith("Look up how many of an item")


def test_tools_show_json() -> None:
    done = cli("tools", "show", "stock", "--json", "-c", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert done.stdout == canonical_json(document) + b"\n"
    tool = in_process()["tools"]["stock"]
    assert document == {
        "spec": tool.spec.to_json(),
        "descriptor": tool.descriptor().to_json(),
        "owner": "python:evidence_tools",
        "layers": [
            {"tool": "stock", "extension": None, "kind": None, "version": None, "config": None}
        ],
    }
    assert document["spec"]["input_schema"] == {
        "additionalProperties": False,
        "properties": {
            "item": {
                "description": "the item to look up.",
                "enum": ["apple", "pear", "plum"],
                "type": "string",
            }
        },
        "required": ["item"],
        "type": "object",
    }


def test_tools_list_and_show_for_people() -> None:
    listing = cli("tools", "list", "-c", str(EXAMPLE))
    assert listing.returncode == 0, listing.stderr
    text = listing.stdout.decode()
    assert "stock" in text
    assert "total" in text
    assert f"descriptor {in_process()['digest']}" in text
    shown = cli("tools", "show", "total", "-c", str(EXAMPLE))
    assert shown.returncode == 0, shown.stderr
    assert "input schema" in shown.stdout.decode()
    assert '"items"' in shown.stdout.decode()


def test_unknown_tool_is_a_one_line_error() -> None:
    done = cli("tools", "show", "nope", "-c", str(EXAMPLE))
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == f"error: no tool named 'nope' in {EXAMPLE}\n"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, "{file}: (file): file not found"),
        (
            {"toolproof.toml": "[[python]\n"},
            "{file}: (file): not valid TOML: Expected ']]' at the end of an array declaration "
            "(at line 1, column 9)",
        ),
        (
            {"toolproof.toml": "[[python]]\nmodule = 'm'\nbogus = 1\n"},
            "{file}: python[0].bogus: unknown key (not part of the toolproof.toml format)",
        ),
        (
            {"toolproof.toml": "[[python]]\nfunctions = ['a']\n"},
            "{file}: python[0].module: required key is missing",
        ),
        (
            {
                "toolproof.toml": "[[python]]\nmodule = 'tp_cli_broken'\n",
                "tp_cli_broken.py": "import json\n\ndef broken(:\n    pass\n",
            },
            "{file}: python[0].module: cannot import module 'tp_cli_broken': "
            "SyntaxError: invalid syntax (tp_cli_broken.py, line 3)",
        ),
        (
            {
                "toolproof.toml": "[[python]]\nmodule = 'tp_cli_tools'\nfunctions = ['nope']\n",
                "tp_cli_tools.py": "def add(a: int) -> int:\n    return a\n",
            },
            "{file}: python[0].functions[0]: module 'tp_cli_tools' has no function 'nope'",
        ),
        (
            {
                "toolproof.toml": "[[python]]\nmodule = 'tp_cli_exits'\n",
                "tp_cli_exits.py": "import sys\nsys.exit(3)\n",
            },
            "{file}: python[0].module: cannot import module 'tp_cli_exits': "
            "SystemExit(3): the module called sys.exit() while being imported",
        ),
        (
            {
                "toolproof.toml": "[[python]]\nmodule = 'tp_cli_interrupts'\n",
                "tp_cli_interrupts.py": "raise KeyboardInterrupt\n",
            },
            "{file}: python[0].module: cannot import module 'tp_cli_interrupts': "
            "KeyboardInterrupt: the import was interrupted (SIGINT or a raise)",
        ),
        (
            {"toolproof.toml": "[[mcp]]\nname = 's'\ncommand = 'x'\nstartup_timeout = 1e308\n"},
            "{file}: mcp[0].startup_timeout: 1e+308 is not a duration: seconds must be a "
            "finite number above 0 and at most 604800 (7 days)",
        ),
    ],
    ids=[
        "missing",
        "bad-toml",
        "unknown-key",
        "no-module-key",
        "import-fails",
        "no-function",
        "sys-exit-at-import",
        "keyboardinterrupt-at-import",
        "absurd-startup-timeout",
    ],
)
def test_bad_config_exits_1_with_one_line(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    for args in (("tools", "list"), ("tools", "list", "--json"), ("tools", "show", "x")):
        done = cli(*args, "--config", str(config))
        assert (done.returncode, done.stdout) == (1, b""), args
        assert done.stderr.decode() == "error: " + expected.format(file=config) + "\n"


def test_people_output_never_reads_tool_text_as_markup(tmp_path: Path) -> None:
    (tmp_path / "tp_cli_markup.py").write_text(
        "import toolproof\n\n@toolproof.tool\ndef weird(x: int) -> int:\n"
        '    """Return list[str] items [/] and [bold]x[/bold]."""\n    return x\n\n'
        "@toolproof.tool\ndef spread(*args: int) -> int:\n    return 0\n",
        encoding="utf-8",
    )
    config = tmp_path / "toolproof.toml"
    config.write_text("[[python]]\nmodule = 'tp_cli_markup'\n", encoding="utf-8")
    listing = cli("tools", "list", "-c", str(config))
    shown = cli("tools", "show", "weird", "-c", str(config))
    assert (listing.returncode, shown.returncode) == (0, 0)
    text = "Return list[str] items [/] and [bold]x[/bold]."
    assert text in listing.stdout.decode()
    assert "bare *args/**kwargs" in listing.stdout.decode()
    assert shown.stdout.decode().splitlines()[1] == text


LAYERED_MODULE = '''import toolproof


@toolproof.tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

LAYERED_CONFIG = """[[python]]
module = "tp_cli_layers"

[tools.add]
extensions = [
  [{name = "timeout", config = {seconds = 5}}, {name = "args", config = {rename = {a = "x"}}}],
]
"""


def _layered(tmp_path: Path) -> Path:
    (tmp_path / "tp_cli_layers.py").write_text(LAYERED_MODULE, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(LAYERED_CONFIG, encoding="utf-8")
    return config


ARGS_CONFIG = {"defaults": {}, "describe": {}, "description": "", "hide": {}, "rename": {"a": "x"}}


def test_tools_show_json_lists_the_layer_chain_outermost_first(tmp_path: Path) -> None:
    config = _layered(tmp_path)
    done = cli("tools", "show", "add_timeout_args", "--json", "-c", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["layers"] == [
        {
            "tool": "add_timeout_args",
            "extension": "args",
            "kind": "transformer",
            "version": "1",
            "config": ARGS_CONFIG,
        },
        {
            "tool": "add_timeout",
            "extension": "timeout",
            "kind": "wrapper",
            "version": "1",
            "config": {"seconds": 5.0},
        },
        {"tool": "add", "extension": None, "kind": None, "version": None, "config": None},
    ]
    base = cli("tools", "show", "add", "--json", "-c", str(config))
    assert json.loads(base.stdout)["layers"] == [
        {"tool": "add", "extension": None, "kind": None, "version": None, "config": None}
    ]


def test_tools_show_prints_the_layer_chain_for_people(tmp_path: Path) -> None:
    config = _layered(tmp_path)
    done = cli("tools", "show", "add_timeout_args", "-c", str(config))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    start = lines.index("layers (outermost first, down to the base tool)")
    assert lines[start:] == [
        "layers (outermost first, down to the base tool)",
        "  add_timeout_args  args (transformer) "
        '{"defaults":{},"describe":{},"description":"","hide":{},"rename":{"a":"x"}}',
        '  add_timeout  timeout (wrapper) {"seconds":5}',
        "  add  (base)",
    ]


def test_a_variant_holds_the_tool_it_extends(tmp_path: Path) -> None:
    config = _layered(tmp_path)

    async def go() -> list[tuple[str, Any, Any]]:
        async with load_toolset(config) as toolset:
            outer = toolset["add_timeout_args"]
            assert outer.inner is toolset["add_timeout"]
            assert toolset["add_timeout"].inner is toolset["add"]
            assert (await outer.call({"x": 1, "b": 2})).value == 3
            return [(t.name, t.inner and t.inner.name, t.config) for t in outer.layers()]

    assert asyncio.run(go()) == [
        ("add_timeout_args", "add_timeout", ARGS_CONFIG),
        ("add_timeout", "add", {"seconds": 5.0}),
        ("add", None, None),
    ]
