"""Sessions sealed into segments: each segment a run that verifies, linked to the one before.

Issue 31 points 1 and 4; DESIGN.md section 15 ("a long-lived recorder may seal
consecutive segments, each a run linked to its predecessor by digest").
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_support import toolproof
from mcp import Client, StdioServerParameters
from runs_support import fetch_toolset
from serve_helpers import SERVE_CONFIG, TOOLPROOF

import toolproof as tp
from toolproof.contract.runs import Manifest, files_digest_for
from toolproof.errors import InputError
from toolproof.identity import canonical_json, digest
from toolproof.runs.chain import check_link, read_link, verify_chain
from toolproof.tools.toolset import Toolset
from toolproof.verify.verifier import verify_run


def _json(path: Path) -> Any:
    return json.loads(path.read_bytes())


async def _record(root: Path, calls: int, segment_calls: int) -> tp.Session:
    async with tp.record_session(
        fetch_toolset(), root=root, task="scale", segment_calls=segment_calls
    ) as session:
        # concurrent: calls admitted in a full segment are answered after the next opened
        await asyncio.gather(*(session.call("fetch", {"i": i}) for i in range(calls)))
    return session


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, list[Path]]:
    session = asyncio.run(_record(tmp_path, 8, 3))
    return tmp_path, [tmp_path / "runs" / run_id for run_id in session.run_ids]


def test_a_session_is_sealed_into_three_linked_runs_that_each_verify(
    sealed: tuple[Path, list[Path]],
) -> None:
    root, runs = sealed
    assert len(runs) == 3
    assert list((root / "sessions").iterdir()) == []
    steps = []
    for run in runs:
        verification = verify_run(run)
        assert verification.ok, [str(failure) for failure in verification.failures]
        steps.append([step["id"] for step in _json(run / "spec.json")["steps"]])
    # nothing lost or reordered: step numbers continue across segments
    assert steps == [
        ["call-00000001", "call-00000002", "call-00000003"],
        ["call-00000004", "call-00000005", "call-00000006"],
        ["call-00000007", "call-00000008"],
    ]
    links = [_json(run / "segment.json") for run in runs]
    session = links[0]["session"]
    assert links[0] == {"session": session, "index": 1, "previous": None}
    for index in (1, 2):
        manifest = Manifest.model_validate_json((runs[index - 1] / "manifest.json").read_bytes())
        assert links[index] == {
            "session": session,
            "index": index + 1,
            "previous": {"run_id": runs[index - 1].name, "files_digest": manifest.files_digest},
        }
    tasks = [_json(run / "spec.json")["task"] for run in runs]
    assert tasks == [f"scale (segment {k} of session {session})" for k in (1, 2, 3)]
    assert [check_link(run).status for run in runs] == ["first", "checked", "checked"]
    chain = verify_chain(runs[2])
    assert chain.ok, chain.problem
    assert [result.directory for result in chain.segments] == runs[::-1]


def test_the_session_names_every_segment_and_its_head(tmp_path: Path) -> None:
    session = asyncio.run(_record(tmp_path, 7, 3))
    assert len(session.run_ids) == 3
    assert session.run_id == session.run_ids[-1]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(session.run_ids)


def test_a_session_shorter_than_a_segment_is_one_run_as_before(tmp_path: Path) -> None:
    session = asyncio.run(_record(tmp_path, 3, 3))
    (run,) = [tmp_path / "runs" / run_id for run_id in session.run_ids]
    assert session.run_id == run.name
    assert read_link(run) is None
    assert _json(run / "spec.json")["task"] == "scale"
    assert check_link(run).status == "none"


def test_segment_calls_zero_never_seals(tmp_path: Path) -> None:
    session = asyncio.run(_record(tmp_path, 8, 0))
    assert len(session.run_ids) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "segment_calls -1: expected 0 (one run) or a positive number of steps per segment"),
        (2.5, "segment_calls 2.5: expected a whole number of steps (0: one run)"),
    ],
)
def test_a_bad_segment_size_is_refused(tmp_path: Path, value: Any, message: str) -> None:
    with pytest.raises(InputError) as caught:
        asyncio.run(_record(tmp_path, 1, value))
    assert caught.value.message == message
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").iterdir())


def _rewrite_timings(run: Path) -> str:
    """Change a run's timings.json and rewrite its manifest to match: it still verifies."""
    timings = _json(run / "timings.json")
    timings["started_at"] = "2000-01-01T00:00:00.000+00:00"
    (run / "timings.json").write_bytes(canonical_json(timings))
    manifest = Manifest.model_validate_json((run / "manifest.json").read_bytes())
    data = (run / "timings.json").read_bytes()
    entries = [
        entry.model_copy(update={"size": len(data), "digest": digest(data)})
        if entry.path == "timings.json"
        else entry
        for entry in manifest.files
    ]
    rewritten = manifest.model_copy(
        update={"files": entries, "files_digest": files_digest_for(entries)}
    )
    (run / "manifest.json").write_bytes(canonical_json(rewritten.to_json()))
    return rewritten.files_digest


def test_a_predecessor_changed_after_sealing_fails_the_link_with_a_precise_message(
    sealed: tuple[Path, list[Path]],
) -> None:
    _, runs = sealed
    recorded = _json(runs[1] / "segment.json")["previous"]["files_digest"]
    changed = _rewrite_timings(runs[0])
    assert verify_run(runs[0]).ok  # alone, the rewritten predecessor still verifies
    session = _json(runs[0] / "segment.json")["session"]
    expected = (
        f"segment 2 of session {session} links to runs/{runs[0].name} with files digest "
        f"{recorded}, but its manifest.json has {changed}: the predecessor changed after "
        "segment 2 was sealed"
    )
    check = check_link(runs[1])
    assert (check.status, check.message) == ("broken", expected)
    chain = verify_chain(runs[2])
    assert chain.problem == expected
    assert [result.link.status for result in chain.segments] == ["checked", "broken"]
    ran = toolproof("verify", str(runs[1]), "--json")
    assert ran.returncode == 2
    document = json.loads(ran.stdout)
    assert document["ok"] is False
    assert document["segment"]["status"] == "broken"
    assert document["segment"]["message"] == expected
    ran = toolproof("verify", str(runs[2]), "--chain", "--json")
    assert ran.returncode == 2
    assert json.loads(ran.stdout)["problem"] == expected


def test_a_damaged_predecessor_fails_the_chain(sealed: tuple[Path, list[Path]]) -> None:
    _, runs = sealed
    evidence = runs[0] / "evidence.pack"
    evidence.write_bytes(evidence.read_bytes() + b"!")
    assert check_link(runs[1]).status == "checked"  # the link itself still holds
    chain = verify_chain(runs[2])
    assert chain.problem.startswith(f"{runs[0].name} does not verify: [manifest] ")
    assert [result.verified for result in chain.segments] == [True, True, False]


def test_an_absent_predecessor_is_a_note_for_verify_and_a_failure_for_the_chain(
    sealed: tuple[Path, list[Path]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, runs = sealed
    shutil.move(runs[0], tmp_path_factory.mktemp("elsewhere") / runs[0].name)
    check = check_link(runs[1])
    assert check.status == "absent"
    assert check.message.endswith(
        f"its predecessor runs/{runs[0].name} is not under this root (link not checked)"
    )
    ran = toolproof("verify", str(runs[1]))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "note segment-link:" in ran.stdout
    chain = verify_chain(runs[2])
    assert chain.problem == check.message
    ran = toolproof("verify", str(runs[2]), "--chain")
    assert ran.returncode == 2
    assert "chain verification FAILED" in ran.stdout


def test_verify_chain_from_the_command_line(sealed: tuple[Path, list[Path]]) -> None:
    root, runs = sealed
    ran = toolproof("verify", runs[2].name, "--root", str(root), "--chain")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "chain verified (3 segments)" in ran.stdout
    ran = toolproof("verify", runs[1].name, "--root", str(root), "--json")
    assert ran.returncode == 0
    assert json.loads(ran.stdout)["segment"]["status"] == "checked"


def test_a_call_cancelled_in_a_full_segment_does_not_hold_its_seal(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def wait(i: int) -> str:
        """Wait for the gate."""
        if i == 0:
            await gate.wait()
        return f"waited {i}"

    toolset = Toolset()
    toolset.add(tp.Tool.from_function(wait))
    toolset.seal()

    async def scenario() -> tp.Session:
        async with tp.record_session(toolset, root=tmp_path, task="t", segment_calls=2) as s:
            stuck = asyncio.ensure_future(s.call("wait", {"i": 0}))
            await asyncio.sleep(0)
            await s.call("wait", {"i": 1})
            await s.call("wait", {"i": 2})  # opens segment 2
            stuck.cancel()
            with pytest.raises(asyncio.CancelledError):
                await stuck
            await s.call("wait", {"i": 3})
        return s

    session = asyncio.run(scenario())
    runs = [tmp_path / "runs" / run_id for run_id in session.run_ids]
    steps = [[step["id"] for step in _json(run / "spec.json")["steps"]] for run in runs]
    assert steps == [["call-00000002"], ["call-00000003", "call-00000004"]]
    assert verify_chain(runs[-1]).ok


def test_serve_record_seals_segments(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[
            *TOOLPROOF[1:],
            "serve",
            "--config",
            str(SERVE_CONFIG),
            "--record",
            str(tmp_path),
            "--segment-calls",
            "2",
        ],
        env=dict(os.environ),  # this checkout's toolproof (PYTHONPATH), as the test's
    )

    async def scenario() -> None:
        async with Client(params) as client:
            for a in range(5):
                await client.call_tool("add", {"a": a, "b": 1})

    asyncio.run(scenario())
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 3
    assert list((tmp_path / "sessions").iterdir()) == []
    (head,) = [run for run in runs if _json(run / "segment.json")["index"] == 3]
    chain = verify_chain(head)
    assert chain.ok, chain.problem
    steps = [
        [step["id"] for step in _json(result.directory / "spec.json")["steps"]]
        for result in reversed(chain.segments)
    ]
    assert steps == [
        ["call-00000001", "call-00000002"],
        ["call-00000003", "call-00000004"],
        ["call-00000005"],
    ]


def test_a_middle_segment_replays_and_shows_with_todays_commands(
    sealed: tuple[Path, list[Path]],
) -> None:
    root, runs = sealed
    replayed = toolproof("replay", runs[1].name, "--root", str(root), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    document = json.loads(replayed.stdout)
    assert (document["identical"], document["live_calls"]) == (True, 0)
    shown = toolproof("show", runs[1].name, "--root", str(root), "--json")
    assert shown.returncode == 0, shown.stderr


def test_the_serve_section_sets_the_segment_size(tmp_path: Path) -> None:
    from toolproof.config.schema import load_config
    from toolproof.errors import ConfigError

    good = tmp_path / "good.toml"
    good.write_text("[serve]\nsegment_calls = 500\n", encoding="utf-8")
    assert load_config(good)[0].serve.segment_calls == 500
    default = tmp_path / "default.toml"
    default.write_text("", encoding="utf-8")
    assert load_config(default)[0].serve.segment_calls == 2000
    bad = tmp_path / "bad.toml"
    bad.write_text("[serve]\nsegment_calls = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert caught.value.message == (
        f"{bad}: serve.segment_calls: Input should be greater than or equal to 0"
    )


def test_model_turns_are_recorded_in_the_segment_that_admitted_them(tmp_path: Path) -> None:
    from toolproof.runs.recorded import ModelExchange

    async def scenario() -> tp.Session:
        async with tp.record_session(
            fetch_toolset(), root=tmp_path, task="t", segment_calls=3
        ) as session:
            for i in range(4):
                step = session.admit_turn("http")
                await session.call("fetch", {"i": i})  # answered while the turn is open
                request = json.dumps({"q": i}).encode()
                key = digest(request)
                session.record_turn(ModelExchange("http", "m", request, b'{"a": 1}', key), step)
        return session

    session = asyncio.run(scenario())
    runs = [tmp_path / "runs" / run_id for run_id in session.run_ids]
    steps = [[step["id"] for step in _json(run / "spec.json")["steps"]] for run in runs]
    assert steps == [
        ["call-00000001", "turn-00000001", "turn-00000002"],
        ["call-00000002", "call-00000003", "turn-00000003"],
        ["call-00000004", "turn-00000004"],
    ]
    assert all(verify_run(run).ok for run in runs)
    assert verify_chain(runs[-1]).ok


def test_verify_chain_never_calls_a_failing_segment_verified(
    sealed: tuple[Path, list[Path]],
) -> None:
    root, runs = sealed
    with (runs[1] / "claims.json").open("ab") as claims:
        claims.write(b" ")
    ran = toolproof("verify", runs[2].name, "--root", str(root), "--chain")
    assert ran.returncode == 2
    assert ran.stderr.splitlines()[:2] == [  # was: verified segment 2: None
        f"verified segment 3: {runs[2].name}",
        f"segment 2: {runs[1].name} does not verify",
    ]
    assert "None" not in ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[-1] == "chain verification FAILED"


def test_verify_chain_of_one_segment_counts_it_in_the_singular(
    sealed: tuple[Path, list[Path]],
) -> None:
    root, runs = sealed
    ran = toolproof("verify", runs[0].name, "--root", str(root), "--chain")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stderr.splitlines() == [f"verified segment 1: {runs[0].name}"]
    assert ran.stdout.splitlines()[-1] == "chain verified (1 segment)"  # was: (1 segments)
