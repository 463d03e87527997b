"""A composition root with one gated tool whose side effect is a file, for the face tests.

``write_gated_root(folder, mode=...)`` writes a tool module and a ``toolproof.toml`` into
``folder``: ``delete_branch`` (its body appends one line per run to ``side_effects.log``
beside the module) with the combo ``[approve]``, and ``list_branches`` (read-only). The
approvals store is ``approvals.sqlite`` in the same folder.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

_COUNTER = itertools.count()

MODULE = '''
from pathlib import Path

import toolproof

LOG = Path(__file__).with_name("side_effects.log")


@toolproof.tool(destructive=True)
async def delete_branch(branch: str, force: bool = False) -> str:
    """Delete a branch (appends a line to side_effects.log: the side effect)."""
    with LOG.open("a", encoding="utf-8") as out:
        out.write(f"{branch} force={force}\\n")
    return f"deleted {branch}"


@toolproof.tool(read_only=True)
async def list_branches() -> list[str]:
    """List the branches."""
    return ["main", "feature"]
'''

APPROVER_TOKEN = "alice-approver-token-0123456789"
OTHER_TOKEN = "bob-approver-token-0123456789ab"
RUNS_TOKEN = "runs-api-token-0123456789abcdef"


def write_gated_root(
    folder: Path, *, mode: str = "defer", timeout: float = 120, serve: str = ""
) -> Path:
    """Write the module and ``toolproof.toml`` into ``folder``; return the toml's path."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"tp_gated_tools_{next(_COUNTER)}_{folder.name.replace('-', '_')}"
    (folder / f"{name}.py").write_text(MODULE, encoding="utf-8")
    config = f"""
        [[python]]
        module = "{name}"

        [tools.delete_branch]
        extensions = [["approve"]]

        [approvals]
        store = "approvals.sqlite"
        timeout_seconds = {timeout}
        mode = "{mode}"
    """
    path = folder / "toolproof.toml"
    path.write_text(textwrap.dedent(config) + textwrap.dedent(serve), encoding="utf-8")
    return path


def write_approvers(folder: Path) -> Path:
    """An ``--approvers`` file naming ``alice`` and ``bob``."""
    path = folder / "approvers.toml"
    path.write_text(f'alice = "{APPROVER_TOKEN}"\nbob = "{OTHER_TOKEN}"\n', encoding="utf-8")
    return path


def side_effects(folder: Path) -> list[str]:
    """The lines the body wrote (one per run)."""
    log = folder / "side_effects.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []
