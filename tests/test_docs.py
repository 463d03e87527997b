"""Every Python block of README.md and docs/*.md runs as written, as a script.

A block is a fenced ```` ```python ```` block. Each one runs as a script of its own, in a
fresh interpreter, from the repository root, unless the line right before its fence
is one of these markers:

* ``<!-- docs: continues -->`` -- the block continues the previous Python block of the
  same file: both (and any earlier blocks of that chain) run as one script, in order.
* ``<!-- docs: skip REASON -->`` -- the block is not run; the reason is required, and
  the skipped blocks are pinned in :data:`SKIPPED` (a list that may only shrink).

New blocks and new pages are picked up without touching this file. A failing block
shows a traceback whose file and line are the Markdown file's own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*$")
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


def parse_blocks(text: str, page: str) -> list[Block]:
    """The Python blocks of Markdown ``text`` (named ``page`` in messages), in order.

    Raises:
        AssertionError: a Python fence is never closed, or a marker is malformed.
    """
    lines = text.splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if not FENCE.match(lines[index]):
            index += 1
            continue
        start = index
        end = next((n for n in range(start + 1, len(lines)) if lines[n] == "```"), None)
        assert end is not None, f"{page}:{start + 1}: the python fence is never closed"
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
