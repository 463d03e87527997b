"""docs/agents.md's ``--agent MODULE:FUNCTION`` recipe, as the page writes it (issue 30 item 24).

``toolproof replay --agent mymod:agent`` imports ``mymod``: a module that records at its
top level records a second run on every replay. The recipe records under
``if __name__ == "__main__":``; in a fresh folder, importing it records nothing,
``python mymod.py`` records one run, and the replay the page shows leaves exactly that
one run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
MODULE_LINE = "# mymod.py: importing it records nothing; `python mymod.py` records one run"


def _recipe() -> tuple[str, list[str]]:
    """The page's ``mymod.py`` block and the ``$`` commands of the console block after it."""
    module = re.search(r"^```python\n(# mymod\.py:.*?)^```", PAGE, re.M | re.S)
    assert module is not None, "docs/agents.md has no mymod.py block"
    console = re.search(r"^```console\n(.*?)^```", PAGE[module.end() :], re.M | re.S)
    assert console is not None, "docs/agents.md shows no commands after mymod.py"
    commands = [line[2:] for line in console[1].splitlines() if line.startswith("$ ")]
    return module[1], commands


def _run(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ["PATH"]])}
    return subprocess.run(
        list(command),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
    )


def _runs(folder: Path) -> list[str]:
    runs = folder / ".toolproof" / "runs"
    return sorted(path.name for path in runs.iterdir()) if runs.is_dir() else []


def test_the_recipe_module_imports_without_recording(tmp_path: Path) -> None:
    source, _ = _recipe()
    assert source.splitlines()[0] == MODULE_LINE
    (tmp_path / "mymod.py").write_text(source, encoding="utf-8")
    imported = _run(tmp_path, sys.executable, "-c", "import mymod; print(mymod.agent.__name__)")
    assert (imported.returncode, imported.stdout) == (0, "agent\n"), imported.stderr
    assert not (tmp_path / ".toolproof").exists()


def test_recording_then_replaying_as_the_page_shows_leaves_one_run(tmp_path: Path) -> None:
    source, commands = _recipe()
    (tmp_path / "mymod.py").write_text(source, encoding="utf-8")
    assert commands[0] == "python mymod.py"
    recorded = _run(tmp_path, sys.executable, "mymod.py")
    assert recorded.returncode == 0, recorded.stderr
    run_id = recorded.stdout.strip()
    assert _runs(tmp_path) == [run_id]
    [replay] = commands[1:]
    assert replay.startswith("toolproof replay run_")
    words = replay.split()
    words[2] = run_id  # the page's run_… placeholder
    replayed = _run(tmp_path, *words)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.strip() == (
        "agent replay identical: 1 tool call served from the recording, 0 live calls; "
        "the run verifies"
    )
    assert _runs(tmp_path) == [run_id]  # the import by --agent recorded nothing


def test_a_module_that_records_at_its_top_level_would_record_again(tmp_path: Path) -> None:
    """What the count above catches: the recipe as the page wrote it before."""
    source, commands = _recipe()
    unguarded = re.sub(r'^if __name__ == "__main__":.*$', "if True:", source, flags=re.M)
    assert unguarded != source
    (tmp_path / "mymod.py").write_text(unguarded, encoding="utf-8")
    run_id = _run(tmp_path, sys.executable, "mymod.py").stdout.strip()
    words = commands[1].split()
    words[2] = run_id
    _run(tmp_path, *words)
    assert len(_runs(tmp_path)) == 2
