"""``verify --recover`` links a live segment sealed before it could link, as a resume does.

A named session with ``segment_calls=2`` that raises after 3 calls leaves segment 1
sealed under ``ROOT/runs`` and segment 2 live under ``ROOT/sessions/crash-1.2`` with
``previous: null``; recovering it must write the link, so the chain verifies.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from runs_support import fetch_toolset
from typer.testing import CliRunner

import toolproof as tp
from toolproof.adapters.cli.app import app
from toolproof.errors import InputError
from toolproof.runs.chain import check_link
from toolproof.runs.finalize import recover_session
from toolproof.runs.seglink import link_of


class Crash(Exception):
    """The agent's failure after its third call."""


def _json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def _crash(root: Path) -> tuple[Path, Path]:
    """Record session crash-1 (2 calls a segment), raise after 3 calls: (sealed 1, live 2)."""

    async def body() -> None:
        async with tp.record_session(
            fetch_toolset(), root=root, task="crash", session_id="crash-1", segment_calls=2
        ) as session:
            for i in range(3):
                await session.call("fetch", {"i": i})
            raise Crash

    with pytest.raises(Crash):
        asyncio.run(body())
    (sealed,) = (root / "runs").iterdir()
    live = root / "sessions" / "crash-1.2"
    assert _json(sealed / "segment.json") == {"session": "crash-1", "index": 1, "previous": None}
    assert _json(live / "segment.json") == {"session": "crash-1", "index": 2, "previous": None}
    return sealed, live


def test_verify_recover_links_the_live_segment_to_its_sealed_predecessor(
    tmp_path: Path,
) -> None:
    sealed, live = _crash(tmp_path)
    # before recovery, verify of the live segment checks it against the sealed run
    check = check_link(live)
    assert check.status == "checked"
    assert check.previous == tmp_path / "runs" / sealed.name
    assert "no link written yet" in check.message
    runner = CliRunner()
    ran = runner.invoke(app, ["verify", str(live), "--root", str(tmp_path), "--recover"])
    assert ran.exit_code == 0, ran.output
    assert ran.output.splitlines()[-1] == "verified"
    (run,) = (path for path in (tmp_path / "runs").iterdir() if path != sealed)
    assert _json(run / "segment.json") == {
        "session": "crash-1",
        "index": 2,
        "previous": link_of(sealed),
    }
    assert link_of(sealed)["run_id"] == sealed.name
    ran = runner.invoke(app, ["verify", run.name, "--chain", "--root", str(tmp_path)])
    assert ran.exit_code == 0, ran.output
    assert "chain verified (2 segments)" in ran.output


def test_recover_refuses_a_segment_whose_predecessor_is_not_sealed(tmp_path: Path) -> None:
    sealed, live = _crash(tmp_path)
    moved = tmp_path / sealed.name
    sealed.rename(moved)
    assert check_link(live).status == "unlinked"
    with pytest.raises(InputError) as caught:
        asyncio.run(recover_session(live))
    assert str(caught.value) == (
        f"session 'crash-1': cannot recover live segment 2: segment 1 is not sealed under "
        f"{tmp_path / 'runs'} (not there); rule: a segment links to its sealed predecessor"
    )
    assert _json(live / "segment.json")["previous"] is None  # kept live, to recover later
