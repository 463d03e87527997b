"""Every Python, TOML and shell block of README.md and docs/*.md holds as written.

**Python** (```` ```python ````): each block runs as a script of its own, in a fresh
interpreter, from the repository root, unless the line right before its fence is one of
these markers:

* ``<!-- docs: continues -->`` -- the block continues the previous Python block of the
  same file: both (and any earlier blocks of that chain) run as one script, in order.
* ``<!-- docs: skip REASON -->`` -- the block is not run; the reason is required, and
  the skipped blocks are pinned in :data:`SKIPPED` (a list that may only shrink).

**TOML** (```` ```toml ````, and the inline spans of prose that start with a table
header and set a key, like ``[tools.add] extensions = [["retry"]]``): each parses, and
by its keys it is one of

* a ``toolproof.toml``: it loads with ``load_config`` (every key, every rule), and each
  element of each ``[tools.NAME] extensions`` combo that names a built-in extension has
  a config that extension accepts (the README once said ``["retry", "timeout"]``, which
  quarantines ``timeout``: it needs ``seconds``);
* a run spec, or a part of one (``[[steps]]``, ``[reasoner]``, ``[[checks]]``): it
  validates as a ``RunSpec``, with ``task`` and ``steps`` filled in when the part lacks them;
* a part of a ``pyproject.toml``: its entry-point groups are toolproof's.

A TOML block meant not to hold (an example of a refusal) has the ``skip`` marker and is
pinned in :data:`SKIPPED_TOML`.

**Shell** (```` ```bash ````, ```` ```console ````, ```` ```sh ````): every ``toolproof``
command of every block, skipped or not, names a real command with options and arguments
it accepts (parsed by the CLI itself; a ``[--flag]`` token is optional notation). A
block without a ``skip`` marker is also run: each command (a ``bash``/``sh`` line, or a
``console`` line after ``$ ``, with its backslash continuation lines) runs in ``bash`` in a
fresh folder whose ``examples/`` is the repository's; it exits 0, or non-zero when the
output the page shows under it has an ``error:`` line; and each output line the page
shows appears in what it printed (``...`` and ``…`` stand for any text). Blocks that
need a server, an install or a placeholder (``<run id>``) are skipped, counted per page
in :data:`SKIPPED_SHELL`.

New blocks and new pages are picked up without touching this file. A failing Python
block shows a traceback whose file and line are the Markdown file's own.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from toolproof.adapters.cli import app
from toolproof.config.schema import ToolproofConfig, load_config
from toolproof.contract.runs import RunSpec
from toolproof.extensions import ExtensionRegistry
from toolproof.extensions.config import normalize_combos

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*$")
TOML_FENCE = re.compile(r"^```toml[ \t]*$")
SHELL_FENCE = re.compile(r"^```(?:bash|console|sh)[ \t]*$")
MARKER = re.compile(r"^<!-- docs: (?P<verb>continues|skip)(?P<reason>.*?)-->\s*$")
# (page, first line of the block): the blocks that cannot run; may only shrink
SKIPPED = {
    (
        "docs/extending.md",
        "from toolproof.testing import assert_check_conforms, assert_reasoner_conforms",
    ),
    ("docs/extending.md", "def test_my_agent(toolproof_cassette, real_toolset):"),
    # needs a model server; tests/runs/test_agent_llama_turns.py runs the same code on one
    ("docs/agents.md", "client = AsyncOpenAI("),
    # records into .toolproof: tests/adapters/test_agent_replay_recipe.py runs it in a
    # fresh folder, imports it and replays it, counting the runs
    (
        "docs/agents.md",
        "# mymod.py: importing it records nothing; `python mymod.py` records one run",
    ),
}


@dataclass(frozen=True)
class Block:
    """One fenced Python block: where it is, its code, and the marker before it."""

    page: str  # path relative to the repository root, POSIX
    line: int  # 1-based line of the opening fence
    code: str
    marker: str  # "", "continues" or "skip"
    reason: str


def blocks_of(path: Path) -> list[Block]:
    """The Python blocks of one Markdown file of the repository, in order."""
    return parse_blocks(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())


def parse_blocks(text: str, page: str, fence: re.Pattern[str] = FENCE) -> list[Block]:
    """The blocks of Markdown ``text`` (named ``page`` in messages) that ``fence`` opens.

    Raises:
        AssertionError: a fence is never closed, or a marker is malformed.
    """
    lines = text.splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if not fence.match(lines[index]):
            index += 1
            continue
        start = index
        end = next((n for n in range(start + 1, len(lines)) if lines[n] == "```"), None)
        language = lines[start].removeprefix("```").strip()
        assert end is not None, f"{page}:{start + 1}: the {language} fence is never closed"
        before = lines[start - 1] if start else ""
        marker = MARKER.match(before)
        if before.startswith("<!-- docs:"):
            assert marker, f"{page}:{start}: unknown marker {before!r}"
        verb = marker["verb"] if marker else ""
        reason = marker["reason"].strip() if marker else ""
        code = "\n" * (start + 1) + "\n".join(lines[start + 1 : end]) + "\n"
        found.append(Block(page, start + 1, code, verb, reason))
        index = end + 1
    return found


def chains(pages: list[list[Block]]) -> list[list[Block]]:
    """The scripts to run: each a block followed by the blocks that continue it."""
    scripts: list[list[Block]] = []
    for blocks in pages:
        previous: list[Block] | None = None
        for block in blocks:
            if block.marker == "skip":
                previous = None
            elif block.marker == "continues":
                assert previous is not None, (
                    f"{block.page}:{block.line}: marked as continuing, but no runnable "
                    "Python block comes before it"
                )
                previous.append(block)
            else:
                previous = [block]
                scripts.append(previous)
    return scripts


def script_of(chain: list[Block]) -> str:
    """The chain as one script whose line numbers are the Markdown file's."""
    text = ""
    for block in chain:
        lines = block.code.splitlines(keepends=True)
        text += "".join(lines[text.count("\n") :])
    return text


CHAINS = chains([blocks_of(path) for path in PAGES])


def test_every_block_runs_or_is_skipped_with_a_reason() -> None:
    every = [block for path in PAGES for block in blocks_of(path)]
    skipped = {
        (block.page, block.code.strip().splitlines()[0])
        for block in every
        if block.marker == "skip"
    }
    assert skipped == SKIPPED
    assert all(block.reason for block in every if block.marker == "skip")
    run = sum(len(chain) for chain in CHAINS)
    assert run + len(skipped) == len(every)
    assert run >= 20


SAMPLE = """Intro.

```python
x = 1
```

Text.

<!-- docs: continues -->
```python
y = x + 1
```

<!-- docs: skip needs an API key -->
```python
call_the_api()
```

```python
z = 3
```
"""


def test_markers_chain_and_skip_blocks() -> None:
    blocks = parse_blocks(SAMPLE, "sample.md")
    assert [(b.line, b.marker, b.reason) for b in blocks] == [
        (3, "", ""),
        (10, "continues", ""),
        (15, "skip", "needs an API key"),
        (19, "", ""),
    ]
    [first, second] = chains([blocks])
    assert [b.line for b in first] == [3, 10] and [b.line for b in second] == [19]
    script = script_of(first)
    assert script.splitlines()[3] == "x = 1" and script.splitlines()[10] == "y = x + 1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("```python\nx = 1\n", "sample.md:1: the python fence is never closed"),
        ("<!-- docs: continue -->\n```python\nx\n```\n", "sample.md:1: unknown marker"),
        (
            "<!-- docs: continues -->\n```python\nx\n```\n",
            "sample.md:2: marked as continuing, but no runnable Python block comes before it",
        ),
    ],
)
def test_a_malformed_page_is_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        chains([parse_blocks(text, "sample.md")])


@pytest.mark.parametrize("chain", CHAINS, ids=[f"{c[0].page}:{c[0].line}" for c in CHAINS])
def test_the_block_runs_as_a_script(chain: list[Block], tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(script_of(chain), encoding="utf-8")
    runner = (
        "import sys\n"
        "source = open(sys.argv[1], encoding='utf-8').read()\n"
        "exec(compile(source, sys.argv[2], 'exec'), {'__name__': '__main__'})\n"
    )
    environment = {
        **os.environ,
        # the venv's executables (mcp-server-time, toolproof) even when it is not activated
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "TOOLPROOF_CACHE": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-c", runner, str(script), chain[0].page],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        env=environment,
    )
    assert done.returncode == 0, done.stderr[-4000:]


# --- TOML -------------------------------------------------------------------------------

SKIPPED_TOML = {
    # the refusal docs/extensions.md explains: `timeout` without its required `seconds`
    ("docs/extensions.md", "[tools.add]"),
}
"""(page, first line) of the TOML blocks that are not meant to hold; may only shrink."""
ENTRY_POINT_GROUPS = {
    "toolproof.checks",
    "toolproof.extensions",
    "toolproof.reasoners",
    "toolproof.retrieval",
    "toolproof.runtimes",
}
INLINE_TOML = re.compile(r"`(\[[A-Za-z0-9_.-]+\] [A-Za-z0-9_]+ = [^`]+)`")
"""An inline code span of prose: a table header and one key (``[telemetry] enabled = true``)."""


def _pages_blocks(fence: re.Pattern[str]) -> list[Block]:
    return [
        block
        for path in PAGES
        for block in parse_blocks(
            path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix(), fence
        )
    ]


def inline_toml(text: str, page: str) -> list[Block]:
    """The inline TOML spans of the prose of ``text`` (outside fenced blocks), as blocks.

    A paragraph's lines are joined first, so a span broken across lines is read whole;
    a block's line is its paragraph's first.
    """
    found: list[Block] = []
    inside = False
    paragraph: list[str] = []
    first = 0
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if line.startswith("```"):
            inside = not inside
        if inside or line.startswith("```") or not line.strip():
            for match in INLINE_TOML.finditer(" ".join(paragraph)):
                header, _, rest = match[1].partition("] ")
                found.append(Block(page, first, f"{header}]\n{rest}\n", "", ""))
            paragraph = []
            continue
        if not paragraph:
            first = number
        paragraph.append(line.strip())
    return found


TOML_BLOCKS = _pages_blocks(TOML_FENCE)
INLINE_BLOCKS = [
    block
    for path in PAGES
    for block in inline_toml(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
]


def check_toml(text: str, tmp_path: Path) -> str:
    """Check one TOML snippet as the module docstring says; return which kind it is.

    Raises:
        AssertionError: it does not hold, with the reason.
        ConfigError: a ``toolproof.toml`` that does not load (file, key, rule).
        ExtensionError: a built-in extension refuses a combo element's config.
        pydantic.ValidationError: a run spec (part) that does not validate.

    """
    raw = tomllib.loads(text)
    keys = set(raw)
    if keys <= set(ToolproofConfig.model_fields):
        file = tmp_path / "toolproof.toml"
        file.write_text(text, encoding="utf-8")
        load_config(file)
        registry = ExtensionRegistry()
        for tool, section in raw.get("tools", {}).items():
            for combo in normalize_combos(str(file), tool, section.get("extensions", [])):
                for element in combo:
                    extension = registry.get(element.name)
                    if extension is not None:
                        extension.parse_config(element.config)
        return "toolproof.toml"
    if keys <= set(RunSpec.model_fields):
        filled: dict[str, Any] = {"task": "docs", "steps": [{"id": "s", "tool": "t"}], **raw}
        RunSpec.model_validate(filled)
        return "run spec"
    if keys == {"project"}:
        groups = set(raw["project"].get("entry-points", {}))
        assert groups and groups <= ENTRY_POINT_GROUPS, groups
        return "pyproject.toml"
    raise AssertionError(
        f"keys {sorted(keys)}: neither a toolproof.toml, a run spec nor a pyproject.toml part "
        "(mark the block <!-- docs: skip REASON --> if it is not meant to hold)"
    )


def test_every_toml_block_holds_or_is_skipped_with_a_reason() -> None:
    skipped = {
        (block.page, block.code.strip().splitlines()[0])
        for block in TOML_BLOCKS
        if block.marker == "skip"
    }
    assert skipped == SKIPPED_TOML
    assert all(block.reason for block in TOML_BLOCKS if block.marker == "skip")
    assert len(TOML_BLOCKS) >= 15 and len(INLINE_BLOCKS) >= 5


CHECKED_TOML = [block for block in TOML_BLOCKS + INLINE_BLOCKS if block.marker != "skip"]


@pytest.mark.parametrize("block", CHECKED_TOML, ids=[f"{b.page}:{b.line}" for b in CHECKED_TOML])
def test_the_toml_holds_as_written(block: Block, tmp_path: Path) -> None:
    check_toml(block.code, tmp_path)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            '[tools.add]\nextensions = [["retry", {name = "timeout", config = {seconds = 5}}]]\n',
            "toolproof.toml",
        ),
        ('[[steps]]\nid = "a"\ntool = "stock"\n', "run spec"),
        ('[project.entry-points."toolproof.checks"]\nx = "m:f"\n', "pyproject.toml"),
    ],
)
def test_each_kind_of_toml_is_told_apart(text: str, kind: str, tmp_path: Path) -> None:
    assert check_toml(text, tmp_path) == kind


def test_the_readme_combo_that_binds_nothing_is_refused(tmp_path: Path) -> None:
    """The class of issue 30 item 20: a combo whose built-in element lacks its config."""
    from toolproof.errors import ExtensionError

    with pytest.raises(ExtensionError, match="invalid config for extension 'timeout': seconds"):
        check_toml('[tools.add]\nextensions = [["retry", "timeout"]]\n', tmp_path)
    with pytest.raises(AssertionError, match=r"neither a toolproof\.toml"):
        check_toml("[tool.ruff]\nline-length = 100\n", tmp_path)
    [span] = inline_toml('See `[tools.add] extensions = [["retry"]]` here.\n', "p.md")
    assert span.code == '[tools.add]\nextensions = [["retry"]]\n'


# --- shell ------------------------------------------------------------------------------

SKIPPED_SHELL = {
    "README.md": 4,
    "docs/agents.md": 1,
    "docs/approvals.md": 2,
    "docs/attestations.md": 2,
    "docs/backends.md": 2,  # the celery and the temporal worker need their servers
    "docs/development.md": 3,
    "docs/lock.md": 1,
    "docs/reasoners.md": 2,
    "docs/retrieval.md": 1,
    "docs/runs.md": 1,
    "docs/serve.md": 4,
    "docs/telemetry.md": 1,
    "docs/viewer.md": 1,
}
"""How many shell blocks of each page are not run (each toolproof command still parses);
the counts may only shrink."""
CLI = typer.main.get_command(app)


@dataclass(frozen=True)
class Command:
    """One command of a shell block and the output lines the page shows under it."""

    line: int
    text: str
    shown: tuple[str, ...]


def commands_of(block: Block, console: bool) -> list[Command]:
    """The commands of a shell block (``console``: the ``$ `` lines), with their output."""
    lines = block.code.splitlines()[block.line :]
    found: list[Command] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if console and not line.startswith("$ "):
            if found and line.strip():
                last = found[-1]
                found[-1] = Command(last.line, last.text, (*last.shown, line))
            index += 1
            continue
        start = index
        text = line.removeprefix("$ ") if console else line
        while text.endswith("\\") and index + 1 < len(lines):
            index += 1
            text = text[:-1] + " " + lines[index].strip()
        if text.strip() and not text.lstrip().startswith("#"):
            found.append(Command(block.line + 1 + start, text, ()))
        index += 1
    return found


def toolproof_invocations(text: str) -> list[list[str]]:
    """The argument lists of each ``toolproof`` invocation in a shell command line."""
    text = re.sub(r"<[^<>]+>", "PLACEHOLDER", text)  # <run id>: one argument
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    invocations: list[list[str]] = []
    current: list[str] | None = None
    for token in lexer:
        if token in {"&&", "||", ";", "|", "&", "(", ")", ">", ">>", "<", "2>"}:
            current = None
            continue
        if current is None:
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
                continue  # an environment assignment before the command
            current = []
            if token == "toolproof":
                invocations.append(current)
            continue
        current.append(token[1:-1] if re.fullmatch(r"\[--?[a-z-]+\]", token) else token)
    return invocations


def parse_invocation(args: list[str]) -> None:
    """Parse ``toolproof ARGS`` with the CLI's own parser, without running it.

    Raises:
        AssertionError: no such command.
        typer.TyperException: (the CLI's parser) an unknown option, a bad value, a
            missing or extra argument.

    """
    command: Any = CLI
    rest = list(args)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        found = command.commands.get(rest[0])
        if found is None:
            raise AssertionError(f"no command {rest[0]!r}")
        command, rest = found, rest[1:]
    if "--help" in rest or "--version" in rest:
        return
    command.make_context(" ".join(args), rest)


SHELL_BLOCKS = _pages_blocks(SHELL_FENCE)


def _console(block: Block) -> bool:
    page = (ROOT / block.page).read_text(encoding="utf-8").splitlines()
    return page[block.line - 1].strip() == "```console"


SHELL_INVOCATIONS = [
    (block, command.line, args)
    for block in SHELL_BLOCKS
    for command in commands_of(block, _console(block))
    for args in toolproof_invocations(command.text)
]


def test_every_shell_block_runs_or_is_skipped_with_a_reason() -> None:
    skipped: dict[str, int] = {}
    for block in SHELL_BLOCKS:
        if block.marker == "skip":
            skipped[block.page] = skipped.get(block.page, 0) + 1
    assert skipped == SKIPPED_SHELL
    assert all(block.reason for block in SHELL_BLOCKS if block.marker == "skip")
    assert len(SHELL_INVOCATIONS) >= 40


@pytest.mark.parametrize(
    ("block", "line", "args"),
    SHELL_INVOCATIONS,
    ids=[f"{block.page}:{line}" for block, line, _ in SHELL_INVOCATIONS],
)
def test_each_toolproof_command_of_the_docs_parses(
    block: Block, line: int, args: list[str]
) -> None:
    try:
        parse_invocation(args)
    except typer.TyperException as exc:
        raise AssertionError(f"{block.page}:{line}: toolproof {shlex.join(args)}: {exc}") from exc


def test_shell_commands_are_read_as_the_page_writes_them() -> None:
    block = Block("p.md", 0, "\n$ toolproof verify RUN \\\n    --root r\nverified\n$ ls\n", "", "")
    assert commands_of(block, console=True) == [
        Command(2, "toolproof verify RUN  --root r", ("verified",)),
        Command(5, "ls", ()),
    ]
    assert toolproof_invocations("X=1 toolproof runs list [--verify] && toolproof run s # c") == [
        ["runs", "list", "--verify"],
        ["run", "s"],
    ]
    assert toolproof_invocations("toolproof show <run id> --html x") == [
        ["show", "PLACEHOLDER", "--html", "x"]
    ]
    with pytest.raises(typer.TyperException, match="No such option: --no-such-option"):
        parse_invocation(["runs", "list", "--no-such-option"])
    with pytest.raises(typer.TyperException, match="Missing parameter: run"):
        parse_invocation(["verify"])
    with pytest.raises(AssertionError, match="no command 'nope'"):
        parse_invocation(["nope"])


def _shown(line: str) -> re.Pattern[str]:
    pieces = re.split(r"\.\.\.|…", line.strip())
    return re.compile(".*".join(re.escape(piece) for piece in pieces))


RUN_SHELL = [block for block in SHELL_BLOCKS if block.marker != "skip"]


@pytest.mark.parametrize("block", RUN_SHELL, ids=[f"{b.page}:{b.line}" for b in RUN_SHELL])
def test_the_shell_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    environment = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "TOOLPROOF_CACHE": str(tmp_path / "cache"),
        "COLUMNS": "200",
    }
    for command in commands_of(block, _console(block)):
        done = subprocess.run(
            ["bash", "-c", command.text],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=110,
            check=False,
            env=environment,
        )
        where = f"{block.page}:{command.line}: {command.text}"
        fails = any(line.startswith("error:") for line in command.shown)
        assert (done.returncode != 0) == fails, (
            f"{where}: exit {done.returncode}\n{done.stderr[-2000:]}"
        )
        printed = (done.stdout + done.stderr).splitlines()
        for shown in command.shown:
            pattern = _shown(shown)
            assert any(pattern.fullmatch(line.strip()) for line in printed), (
                f"{where}: the page shows {shown!r}; printed:\n{done.stdout}{done.stderr}"
            )
