"""The command-line contract, per command, through the ``toolproof`` app, in process.

Exit codes (docs/runs.md): 0 ok, 1 usage or input error, 2 verification failed or
replay refused. Help texts show flags as flags and end with their documentation page;
a long option has the same short form on every command.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_support import Ran, toolproof

from toolproof.adapters.cli import app
from toolproof.adapters.cli.options import SHORT_OPTIONS

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path | None = None) -> Ran:
    return toolproof(*args, cwd=cwd, env={"COLUMNS": "200"})


def _commands() -> dict[str, Any]:
    """Every leaf command by its path (``("tools", "list")``), and every group."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        found[" ".join(path)] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()
LEAVES = sorted(name for name, cmd in COMMANDS.items() if name and not hasattr(cmd, "commands"))
GROUPS = sorted(name for name, cmd in COMMANDS.items() if hasattr(cmd, "commands"))
WITH_JSON = [name for name in LEAVES if any("--json" in p.opts for p in COMMANDS[name].params)]


def test_the_command_tree_is_the_documented_one() -> None:
    assert LEAVES == [
        "approvals approve",
        "approvals deny",
        "approvals list",
        "approvals show",
        "attest",
        "call",
        "corpus info",
        "corpus python-docs",
        "diff",
        "extensions list",
        "keygen",
        "lock",
        "mcp login",
        "replay",
        "run",
        "runs list",
        "serve",
        "serve-api",
        "sessions list",
        "sessions reconcile",
        "show",
        "tools lint",
        "tools list",
        "tools show",
        "verify",
        "view",
        "worker",
    ]
    assert GROUPS == [
        "",
        "approvals",
        "corpus",
        "extensions",
        "mcp",
        "runs",
        "sessions",
        "tools",
    ]


@pytest.mark.parametrize("group", GROUPS)
def test_a_group_without_a_command_shows_help_and_exits_1(group: str) -> None:
    done = _cli(*group.split())
    assert done.returncode == 1
    assert "Usage: toolproof" in done.stdout + done.stderr


@pytest.mark.parametrize("command", LEAVES)
def test_an_unknown_option_exits_1(command: str) -> None:
    done = _cli(*command.split(), "--no-such-option")
    assert done.returncode == 1
    assert "No such option: --no-such-option" in done.stderr


def _positionals(command: str) -> list[str]:
    """Placeholders for a command's arguments, so that a value after ``--json`` is extra."""
    arguments = [p for p in COMMANDS[command].params if p.param_type_name == "argument"]
    return [f"placeholder-{index}" for index, _ in enumerate(arguments)]


@pytest.mark.parametrize("command", WITH_JSON)
def test_a_value_after_the_json_flag_exits_1(command: str, tmp_path: Path) -> None:
    done = _cli(*command.split(), *_positionals(command), "--json", "true", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"Usage: toolproof {command} [OPTIONS]")
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_command_exits_1() -> None:
    done = _cli("verifyy")
    assert done.returncode == 1
    assert "No such command 'verifyy'" in done.stderr


@pytest.mark.parametrize("command", ["", *LEAVES])
def test_help_shows_flags_as_flags_and_ends_with_the_doc_page(command: str) -> None:
    done = _cli(*command.split(), "--help")
    assert done.returncode == 0
    text = done.stdout
    assert "<bool>" not in text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage
    last = [line.strip() for line in text.splitlines() if line.strip()][-1]
    assert last.startswith("Documentation: docs/")
    assert (REPO / last.removeprefix("Documentation: ")).is_file()


@pytest.mark.parametrize("command", LEAVES)
def test_help_keeps_the_bracketed_words_of_every_option(command: str) -> None:
    """Rich markup must not eat ``[approvals]`` or ``[extensions]`` out of a help text."""
    helps = [getattr(p, "help", None) or "" for p in COMMANDS[command].params]
    words = [w.replace("\\[", "[") for h in helps for w in re.findall(r"\\?\[[a-z.]+\]", h)]
    text = _cli(*command.split(), "--help").stdout
    assert [word for word in words if word not in text] == []


def test_a_long_option_has_the_same_short_form_on_every_command() -> None:
    seen: dict[str, set[str]] = {}
    for name in LEAVES:
        for param in COMMANDS[name].params:
            longs = [opt for opt in param.opts if opt.startswith("--")]
            shorts = sorted(opt for opt in param.opts if not opt.startswith("--"))
            for long in longs:
                seen.setdefault(long, set()).add(",".join(shorts))
    assert {long: forms for long, forms in seen.items() if forms != {""}} == {
        long: {short} for long, short in SHORT_OPTIONS.items()
    }
    assert "-c" in _cli("replay", "--help").stdout


def test_tools_list_strict_exits_1_when_something_was_quarantined(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(
        "import toolproof\n\n@toolproof.tool\ndef put(key: str) -> str:\n    return key\n",
        encoding="utf-8",
    )
    config = tmp_path / "toolproof.toml"
    config.write_text(
        '[[python]]\nmodule = "tools"\n[tools.put]\nextensions = [["retry"]]\n', encoding="utf-8"
    )
    plain = _cli("tools", "list", "-c", str(config), cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "quarantined" in plain.stdout
    strict = _cli("tools", "list", "-c", str(config), "--strict", "--json", cwd=tmp_path)
    assert strict.returncode == 1
    assert (
        "@toolproof.tool(read_only=True), @toolproof.tool(idempotent=True) or "
        '@toolproof.tool(idempotency=\\"key\\")' in strict.stdout
    )
    clean = tmp_path / "clean.toml"
    clean.write_text('[[python]]\nmodule = "tools"\n', encoding="utf-8")
    assert _cli("tools", "list", "-c", str(clean), "--strict", cwd=tmp_path).returncode == 0


def test_a_missing_corpus_folder_suggests_the_command_that_writes_it(tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text('[[retrieval]]\nname = "retrieve"\ncorpus = "corpus"\n', encoding="utf-8")
    done = _cli("tools", "list", "-c", str(config))
    assert done.returncode == 1
    assert done.stderr.replace("\n", "") == (
        f"error: {config}: retrieval[0].corpus: corpus folder {tmp_path}/corpus does not exist "
        f"(write one with `toolproof corpus python-docs {tmp_path}/corpus` for the Python "
        "reference corpus, or put .txt/.md/.rst/.html files there)"
    )


@pytest.mark.parametrize("command", LEAVES)
def test_help_is_plain_text_without_rst_backquotes(command: str) -> None:
    assert "``" not in _cli(*command.split(), "--help").stdout  # was: show's ``--limit``


@pytest.mark.parametrize(
    ("command", "start"),
    [
        (
            "show",
            "An agent run with model turns is a timeline: each model turn, the tool calls "
            "after it, then the answer with each citation and its bytes.",
        ),
        (
            "sessions list",
            "A session whose run was committed before a kill kept its directory "
            "shows as 'committed RUN'; a directory there",
        ),
    ],
)
def test_help_paragraphs_wrap_to_the_terminal_not_the_docstring(command: str, start: str) -> None:
    lines = [line.strip() for line in _cli(*command.split(), "--help").stdout.splitlines()]
    [line] = [line for line in lines if line.startswith(start[:40])]
    assert line.startswith(start)  # was broken where the docstring's source line ended
