"""Break-it pass on the approval gate (issue 16): each test is an attempt that once got through."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolproof import ApprovalRequest, ApprovalStore, Session, load_toolset
from toolproof.adapters.session_runs import record_session
from toolproof.contract.approval_rules import rule_from_record
from toolproof.contract.runs import RunSpec
from toolproof.errors import InputError
from toolproof.identity import canonical_json, digest_json
from toolproof.runs.planner import plan_run
from toolproof.testing import Cassette
from toolproof.verify.verifier import verify_run

HERE = Path(__file__).resolve().parent
GATED = "delete_branch_approve"
TOOLPROOF = str(Path(sys.executable).parent / "toolproof")


def write_config(tmp_path: Path, approvals: str = "") -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f"""
[[python]]
module = "approve_fixture_tools"
path = "{HERE}"

[tools.delete_branch]
extensions = [["approve"]]

{approvals}
""",
        encoding="utf-8",
    )
    return config


def test_a_store_row_rewritten_to_other_arguments_approves_nothing_for_the_waiting_call(
    tmp_path: Path,
) -> None:
    """The waiting call's own digest is what an approval must name, not the row's."""
    config = write_config(tmp_path, "[approvals]\ntimeout_seconds = 30\n")
    side = tmp_path / "side.txt"
    path = tmp_path / "approvals.sqlite"
    store = ApprovalStore(path)
    benign = {"path": str(side), "branch": "harmless"}

    def tamper_then_approve() -> None:
        while not (path.exists() and store.list()):
            pass
        (row,) = store.list()
        with sqlite3.connect(path) as db:  # the row now shows (and digests) other bytes
            db.execute(
                "UPDATE approval_requests SET arguments = ?, arguments_digest = ? WHERE id = ?",
                (canonical_json(benign).decode(), digest_json(benign), row.id),
            )
        shown = store.require(row.id)
        store.decide(
            row.id,
            approve=True,
            who="alice",
            channel="cli",
            approved_digest=digest_json(shown.arguments),
        )

    async def main() -> tuple[Any, str]:
        async with load_toolset(config) as toolset:
            call = toolset[GATED].call({"path": str(side), "branch": "main", "force": True})
            result, _ = await asyncio.gather(call, asyncio.to_thread(tamper_then_approve))
            return result, toolset[GATED].descriptor().fingerprint

    result, fingerprint = asyncio.run(main())
    assert not side.exists()
    assert result.failure.kind == "approval_denied"
    asked = digest_json({"path": str(side), "branch": "main", "force": True})
    assert result.failure.detail["reason"] == (
        "the store's row now names another tool, descriptor or arguments than this call's "
        f"({GATED}, {fingerprint}, {asked}); it approves nothing"
    )


def _edited_row(tmp_path: Path) -> tuple[ApprovalStore, str, dict[str, Any]]:
    """A pending row whose shown arguments were swapped for harmless ones (digest kept)."""
    store = ApprovalStore(tmp_path / "approvals.sqlite")
    real = {"path": "/x", "branch": "main", "force": True}
    row = store.create(
        tool=GATED,
        fingerprint="sha256:" + "0" * 64,
        arguments_digest=digest_json(real),
        arguments=real,
        call_id=None,
        rule=None,
        mode="wait",
        timeout_seconds=60,
    )
    shown = {"path": "/x", "branch": "harmless"}
    with sqlite3.connect(store.path) as db:
        db.execute(
            "UPDATE approval_requests SET arguments = ? WHERE id = ?",
            (canonical_json(shown).decode(), row.id),
        )
    return store, row.id, real


def test_an_edited_row_cannot_be_approved_as_asked_by_any_channel(tmp_path: Path) -> None:
    """What a person reads (``arguments``) must be what the approval's digest names."""
    store, request, real = _edited_row(tmp_path)
    with pytest.raises(InputError) as caught:
        store.decide(
            request, approve=True, who="alice", channel="cli", approved_digest=digest_json(real)
        )
    shown = digest_json({"path": "/x", "branch": "harmless"})
    assert caught.value.message == (
        f"approval request {request!r} cannot be approved as asked: its arguments digest to "
        f"{shown}, but the row records {digest_json(real)} and the approval names "
        f"{digest_json(real)} (rule: an approval names the digest of the arguments a person "
        "was shown; was the store edited?)"
    )
    assert caught.value.fields["rule"] == "row integrity"
    cli = subprocess.run(
        [TOOLPROOF, "approvals", "approve", request, "--store", str(store.path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "400"},
        check=False,
    )
    assert cli.returncode == 1
    assert "cannot be approved as asked" in " ".join(cli.stderr.split())
    assert store.require(request).status == "pending"
    denied = store.decide(request, approve=False, who="alice", channel="cli")
    assert denied.status == "denied"


def test_a_recording_cassette_session_hides_the_ungated_base_like_every_face(
    tmp_path: Path,
) -> None:
    """``Session.from_cassette`` (a recording one runs real bodies) is an outward face too."""
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"

    async def deny(request: ApprovalRequest) -> bool:
        return False

    async def main() -> tuple[list[str], Any, Any]:
        async with load_toolset(config, approver=deny) as toolset:
            session = Session.from_cassette(Cassette(tmp_path / "cassette", "once"), toolset)
            names = [spec.name for spec in session.tool_specs()]
            base = await session.call("delete_branch", {"path": str(side), "branch": "main"})
            gated = await session.call(GATED, {"path": str(side), "branch": "main"})
            return names, base, gated

    names, base, gated = asyncio.run(main())
    assert "delete_branch" not in names and GATED in names
    assert base.failure.kind == "unknown_tool"
    assert gated.failure.kind == "approval_denied"
    assert not side.exists()


@pytest.mark.parametrize(
    ("combo", "gate", "exposed_gate"),
    [
        # retry is refused on the non-idempotent tool: layer 0, before the gate, so
        # nothing binds and the gate the config asked for did not bind
        ('["retry", "approve"]', "delete_branch_retry_approve (quarantined)", []),
        # the gate binds (the valid prefix); retry outside it is refused
        ('["approve", "retry"]', "delete_branch_approve", ["delete_branch_approve"]),
    ],
)
def test_a_gated_combo_that_is_quarantined_still_hides_the_ungated_base(
    tmp_path: Path, combo: str, gate: str, exposed_gate: list[str]
) -> None:
    """A gate the config asks for but that did not bind fails closed, not open."""
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{HERE}"\n\n'
        f"[tools.delete_branch]\nextensions = [{combo}]\n",
        encoding="utf-8",
    )
    spec = RunSpec.model_validate(
        {"task": "t", "steps": [{"id": "s", "tool": "delete_branch", "arguments": {}}]}
    )

    async def main() -> tuple[list[str], dict[str, str], list[str]]:
        async with load_toolset(config) as toolset:
            quarantined = [q.name for q in toolset.quarantined]
            return quarantined, toolset.hidden(), [t.name for t in toolset.exposed()]

    quarantined, hidden, exposed = asyncio.run(main())
    assert quarantined == ["delete_branch_" + "_".join(json.loads(combo))]
    assert hidden == {
        "delete_branch": f"ungated: {gate} gates delete_branch (name it in [serve] expose to "
        "show it)"
    }
    assert exposed == [*exposed_gate, "list_branches"]

    async def planned() -> None:
        async with load_toolset(config) as toolset:
            plan_run(spec, toolset.descriptor())

    with pytest.raises(InputError) as refused:
        asyncio.run(planned())
    assert refused.value.fields["rule"] == "exposure"


def test_a_rule_sees_the_schema_default_of_an_omitted_argument(tmp_path: Path) -> None:
    """Omitting ``force`` (default ``true``) must not slip past ``{"/force" = true}``."""
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "approve_default_tools"\npath = "{HERE}"\n\n'
        '[tools.wipe]\nextensions = [["approve"]]\n\n'
        '[[approvals.rules]]\narguments = { "/force" = true }\n',
        encoding="utf-8",
    )
    side = tmp_path / "side.txt"
    asked: list[dict[str, Any]] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.arguments)
        return request.arguments.get("force") is not None  # only an explicit force

    async def main() -> tuple[list[Any], str]:
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            tool = s.toolset["wipe_approve"]
            results = [
                await tool.call({"path": str(side)}),
                await tool.call({"path": str(side), "force": False}),
                await tool.call({"path": str(side), "force": True}),
            ]
        assert s.run_id is not None
        return results, s.run_id

    (omitted, off, on), run_id = asyncio.run(main())
    assert omitted.failure.kind == "approval_denied"
    assert (off.value, on.value) == ("wiped", "wiped")
    assert asked == [{"path": str(side)}, {"path": str(side), "force": True}]
    assert side.read_text(encoding="utf-8") == "force=False\nforce=True\n"
    assert verify_run(tmp_path / "root" / "runs" / run_id).ok
    rule = {"index": 0, "when": {}, "arguments": {"/force": True}, "defaults": {"force": True}}
    assert rule_from_record(rule).matches({"path": "p"})
    assert not rule_from_record(rule).matches({"path": "p", "force": False})


def test_array_indexes_in_rule_pointers_are_rfc_6901_ones() -> None:
    """``'²'`` passes ``str.isdigit`` but not ``int``: it resolves nothing instead of raising."""
    rule = rule_from_record({"index": 0, "arguments": {"/items/²": 1}})
    assert not rule.matches({"items": [1, 2, 3]})
    assert not rule_from_record({"index": 0, "arguments": {"/items/01": 2}}).matches(
        {"items": [1, 2]}
    )
    assert rule_from_record({"index": 0, "arguments": {"/items/1": 2}}).matches({"items": [1, 2]})
    assert rule_from_record({"index": 0, "arguments": {"/items/0": 1}}).matches({"items": [1, 2]})


def test_two_openers_of_a_new_store_file_both_succeed(tmp_path: Path) -> None:
    """A server creating the store while ``toolproof approve`` lists it: neither is locked out.

    SQLite refuses ``PRAGMA journal_mode=WAL`` with "database is locked" at once (no busy
    handler) while another connection creates the same file; the clean-clone CI run of
    f8c1532 failed the test above on exactly that. 60 fresh files, a creator and a lister
    each: every open succeeds and the lister sees the one row.
    """
    import threading

    failures: list[str] = []

    def creator(path: Path) -> None:
        try:
            ApprovalStore(path).create(
                tool=GATED,
                fingerprint="sha256:" + "0" * 64,
                arguments_digest=digest_json({}),
                arguments={},
                call_id=None,
                rule=None,
                mode="wait",
                timeout_seconds=60,
            )
        except sqlite3.Error as exc:
            failures.append(f"creator: {exc}")

    def lister(path: Path) -> None:
        try:
            while not path.exists():
                pass
            store = ApprovalStore(path)
            for _ in range(20_000):
                if store.list():
                    return
            failures.append("lister: never saw the row")
        except sqlite3.Error as exc:
            failures.append(f"lister: {exc}")

    for index in range(60):
        path = tmp_path / f"approvals-{index}.sqlite"
        threads = [
            threading.Thread(target=lister, args=(path,)),
            threading.Thread(target=creator, args=(path,)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
