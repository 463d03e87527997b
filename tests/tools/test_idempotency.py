"""Idempotency keys and declared idempotency (issue 34 points 1 and 2).

The formula, retries, occurrences, the record, the MCP ``_meta``; ``idempotency="key"``
on a function, a declaration and in ``toolproof.toml``, and ``retry`` allowed by it.

Real parts throughout: a ``toolproof.toml`` with a ``[[python]]`` module written here,
the built-in ``retry`` wrapper, ``record_session`` writing and finalizing a run, and
``verify_run`` on it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolproof
from toolproof import load_toolset
from toolproof.identity import canonical_json, digest, digest_json
from toolproof.tools import idempotency
from toolproof.tools.idempotency import (
    IDEMPOTENCY_META_KEY,
    Occurrences,
    SessionKeys,
    current_idempotency_key,
    idempotency_key,
)

FINGERPRINT = "sha256:" + "ab" * 32
TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
KEY_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_key_server.py"

TOOLS = '''
import toolproof

SEEN: list = []
FAILS_LEFT: dict = {}


@toolproof.tool(idempotency="key")
def flaky(order: str, ctx: toolproof.Context) -> str:
    """Fails once per order, then answers with its key."""
    SEEN.append((order, ctx.idempotency_key))
    if FAILS_LEFT.setdefault(order, 1):
        FAILS_LEFT[order] -= 1
        raise RuntimeError("flaky: try again")
    return ctx.idempotency_key or "no key"
'''


def write_config(tmp_path: Path, module: str, extra: str = "") -> Path:
    (tmp_path / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "{module}"\npath = "."\n\n'
        '[tools.flaky]\nextensions = [{name = "retry", config = {attempts = 3, backoff = 0}}]\n'
        + extra,
        encoding="utf-8",
    )
    return config


def events(run: Path) -> list[dict[str, Any]]:
    lines = (run / "trace.jsonl").read_bytes().splitlines()
    return [json.loads(line) for line in lines]


def test_the_formula_is_sha256_of_the_canonical_json_of_the_five_inputs() -> None:
    arguments = digest_json({"order": "A-1", "amount": 5})
    assert arguments == "sha256:9fbb451d84f0774c7492da5f8a213a08fe5a94c5965596453903d24757107d27"
    key = idempotency_key("nightly-42", "charge", FINGERPRINT, arguments, 1)
    assert key == "idem_7207824fb46c8dfd7f202a78031418df6d5049750a7ad2cd1746643e238a5b35"
    inputs = {
        "session": "nightly-42",
        "tool": "charge",
        "fingerprint": FINGERPRINT,
        "arguments_digest": arguments,
        "occurrence": 1,
    }
    assert key == "idem_" + hashlib.sha256(canonical_json(inputs)).hexdigest()


def test_a_different_occurrence_session_or_argument_gives_a_different_key() -> None:
    arguments = digest_json({"order": "A-1"})
    first = idempotency_key("s", "charge", FINGERPRINT, arguments, 1)
    assert first == idempotency_key("s", "charge", FINGERPRINT, arguments, 1)
    others = {
        idempotency_key("s", "charge", FINGERPRINT, arguments, 2),
        idempotency_key("t", "charge", FINGERPRINT, arguments, 1),
        idempotency_key("s", "refund", FINGERPRINT, arguments, 1),
        idempotency_key("s", "charge", "sha256:" + "cd" * 32, arguments, 1),
        idempotency_key("s", "charge", FINGERPRINT, digest_json({"order": "A-2"}), 1),
    }
    assert len(others) == 5 and first not in others


def test_an_occurrence_that_is_not_a_count_is_refused() -> None:
    with pytest.raises(ValueError, match=r"occurrence 0 is not a count \(rule: an int >= 1\)"):
        idempotency_key("s", "charge", FINGERPRINT, digest_json({}), 0)


def test_session_keys_count_each_exact_call_in_admission_order() -> None:
    keys = SessionKeys("s", {"charge": FINGERPRINT})
    one, two = canonical_json({"order": "A-1"}), canonical_json({"order": "A-2"})
    got = [keys.key("charge", one), keys.key("charge", two), keys.key("charge", one)]
    digest_one, digest_two = digest_json({"order": "A-1"}), digest_json({"order": "A-2"})
    assert got == [
        idempotency_key("s", "charge", FINGERPRINT, digest_one, 1),
        idempotency_key("s", "charge", FINGERPRINT, digest_two, 1),
        idempotency_key("s", "charge", FINGERPRINT, digest_one, 2),
    ]


def test_outside_a_recording_session_a_call_has_no_key() -> None:
    async def body(ctx: toolproof.Context) -> str:
        return repr((ctx.idempotency_key, current_idempotency_key()))

    tool = toolproof.Tool.from_function(body)
    assert asyncio.run(tool.call({})).value == "(None, None)"
    assert IDEMPOTENCY_META_KEY == "io.toolproof/idempotency-key"


def test_every_retry_attempt_reads_the_key_the_record_holds(tmp_path: Path) -> None:
    config = write_config(tmp_path, "idem_retry_tools")

    async def main() -> tuple[list[Any], str | None, str]:
        async with (
            load_toolset(config) as toolset,
            toolproof.record_session(toolset, root=tmp_path, task="t") as session,
        ):
            answers = [
                (await session.call("flaky_retry", {"order": "A-1"})).value,
                (await session.call("flaky_retry", {"order": "A-2"})).value,
                (await session.call("flaky_retry", {"order": "A-1"})).value,
            ]
            # the session's id: its live directory's name (the run is committed at exit)
            [live] = list((tmp_path / "sessions").iterdir())
        return answers, session.run_id, live.name

    answers, run_id, session_id = asyncio.run(main())
    seen = sys.modules["idem_retry_tools"].SEEN
    # A-1 failed once and was retried: both attempts read the same key; A-2 likewise;
    # the second A-1 (already past its failure) ran once, as a new occurrence
    assert [order for order, _ in seen] == ["A-1", "A-1", "A-2", "A-2", "A-1"]
    assert seen[0][1] == seen[1][1] == answers[0]
    assert seen[2][1] == seen[3][1] == answers[1]
    assert seen[4][1] == answers[2]
    assert len(set(answers)) == 3 and all(str(a).startswith("idem_") for a in answers)
    assert run_id is not None
    run = tmp_path / "runs" / run_id
    called = [e for e in events(run) if e["type"] == "tool_called"]
    assert [e["idempotency_key"] for e in called] == answers
    assert all("idempotency_key" not in e["call"] for e in called)
    # the formula, recomputed from the session id and the fingerprint runtime.json holds
    runtime = json.loads((run / "runtime.json").read_bytes())
    tools = {tool["name"]: tool["fingerprint"] for tool in runtime["toolset"]["tools"]}
    assert answers[2] == idempotency_key(
        session_id, "flaky_retry", tools["flaky_retry"], digest_json({"order": "A-1"}), 2
    )
    assert toolproof.verify_run(run).ok is True


def test_an_imported_mcp_tool_receives_the_key_in_the_request_meta(tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[mcp]]\nname = "pay"\ncommand = "{sys.executable}"\nargs = ["{KEY_SERVER}"]\n',
        encoding="utf-8",
    )

    async def main() -> tuple[list[Any], Any]:
        async with load_toolset(config) as toolset:
            bare = await toolset["pay_charge"].call({"order": "A-1"})
            async with toolproof.record_session(toolset, root=tmp_path, task="t") as session:
                first = await session.call("pay_charge", {"order": "A-1"})
                again = await session.call("pay_charge", {"order": "A-1"})
        return [bare.value, first.value, again.value], session.run_id

    (bare, first, again), run_id = asyncio.run(main())
    assert bare == "none"  # outside a recording session: no key is sent
    run = tmp_path / "runs" / str(run_id)
    called = [e for e in events(run) if e["type"] == "tool_called"]
    assert [first, again] == [e["idempotency_key"] for e in called]
    assert first != again and str(first).startswith("idem_")


def test_idempotency_key_is_a_spec_field_only_when_declared() -> None:
    @toolproof.tool(idempotency="key")
    def keyed(order: str) -> str:
        """Charge."""
        return order

    def plain(order: str) -> str:
        """Charge."""
        return order

    tool = toolproof.Tool.from_function(keyed, name="charge")
    assert tool.spec.idempotency == "key" and tool.spec.honours_key
    assert tool.spec.to_json()["idempotency"] == "key"
    bare = toolproof.Tool.from_function(plain, name="charge")
    assert "idempotency" not in bare.spec.to_json()  # fingerprints of other tools unchanged
    assert bare.spec.model_copy(update={"idempotency": "key"}).to_json() == tool.spec.to_json()
    assert bare.descriptor().fingerprint != tool.descriptor().fingerprint
    with pytest.raises(ValueError, match=r"idempotency='yes' is not an option \(rule: 'key'"):
        toolproof.tool(idempotency="yes")  # type: ignore[call-overload]


def test_a_declared_tool_states_it_in_its_contribution() -> None:
    async def invoke(arguments: dict[str, Any]) -> str:
        return "charged"

    contribution = toolproof.ToolContribution(
        name="charge",
        description="Charge.",
        input_schema={"type": "object"},
        invoke=invoke,
        idempotency="key",
    )
    assert toolproof.bind_contribution(contribution).spec.idempotency == "key"


def test_toml_declares_an_mcp_tool_keyed_and_retry_binds_on_it(tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[mcp]]\nname = "pay"\ncommand = "{sys.executable}"\nargs = ["{KEY_SERVER}"]\n\n'
        '[tools.pay_charge]\nidempotency = "key"\nextensions = ["retry"]\n',
        encoding="utf-8",
    )

    async def main() -> list[Any]:
        async with load_toolset(config) as toolset:
            specs = [toolset[name].spec.idempotency for name in ("pay_charge", "pay_charge_retry")]
            async with toolproof.record_session(toolset, root=tmp_path, task="t") as session:
                sent = await session.call("pay_charge_retry", {"order": "A-1"})
        return [*specs, str(sent.value)[:5]]

    assert asyncio.run(main()) == ["key", "key", "idem_"]


def test_toml_idempotency_of_an_unknown_tool_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, "idem_unknown_tools", '\n[tools.nope]\nidempotency = "key"\n')

    async def main() -> None:
        async with load_toolset(config):
            pass

    with pytest.raises(toolproof.ConfigError) as raised:
        asyncio.run(main())
    assert raised.value.key == "tools.nope.idempotency"
    assert raised.value.rule == (
        "no tool 'nope' is bound (tools: flaky; rule: idempotency declares what a bound "
        "tool's body does)"
    )


def test_retry_on_a_tool_with_none_of_the_three_options_names_all_three(tmp_path: Path) -> None:
    (tmp_path / "idem_plain_tools.py").write_text(
        "import toolproof\n\n\n@toolproof.tool\ndef send(to: str) -> str:\n"
        '    """Send a mail."""\n    return to\n',
        encoding="utf-8",
    )
    config = tmp_path / "toolproof.toml"
    config.write_text(
        '[[python]]\nmodule = "idem_plain_tools"\npath = "."\n\n'
        '[tools.send]\nextensions = ["retry"]\n',
        encoding="utf-8",
    )

    async def main() -> Any:
        async with load_toolset(config) as toolset:
            return {item.name: item.rule for item in toolset.quarantined}

    assert asyncio.run(main()) == {
        "send_retry": "cannot apply combo [retry] to tool 'send': 'retry' refused on tool "
        "'send': it is marked neither read-only nor idempotent, nor does it honour the "
        'idempotency key (rule: mark the tool read_only, idempotent or idempotency = "key": '
        "@toolproof.tool(read_only=True), @toolproof.tool(idempotent=True) or "
        '@toolproof.tool(idempotency="key") on a Python function; readOnlyHint or '
        'idempotentHint on a declared or MCP tool, or idempotency = "key" in its [tools.NAME] '
        "table; or set config force = true)"
    }


def test_the_segments_of_one_session_share_its_id_and_its_occurrence_count(
    tmp_path: Path,
) -> None:
    async def echo(order: str, ctx: toolproof.Context) -> str:
        return ctx.idempotency_key or "no key"

    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(echo, name="charge"))
    toolset.seal()

    async def main() -> tuple[list[Any], list[str]]:
        async with toolproof.record_session(
            toolset, root=tmp_path, task="t", segment_calls=2
        ) as session:
            keys = [(await session.call("charge", {"order": "A-1"})).value for _ in range(5)]
        return keys, session.run_ids

    keys, run_ids = asyncio.run(main())
    assert len(run_ids) == 3  # 2 + 2 + 1 calls
    runs = [tmp_path / "runs" / run_id for run_id in run_ids]
    session_id = json.loads((runs[0] / "segment.json").read_bytes())["session"]
    assert all(json.loads((r / "segment.json").read_bytes())["session"] == session_id for r in runs)
    fingerprint = toolset["charge"].descriptor().fingerprint
    digest_ = digest_json({"order": "A-1"})
    assert keys == [
        idempotency_key(session_id, "charge", fingerprint, digest_, n) for n in range(1, 6)
    ]
    recorded = [e["idempotency_key"] for r in runs for e in events(r) if e["type"] == "tool_called"]
    assert recorded == keys


def test_tools_list_json_shows_which_tools_honour_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, "idem_listed_tools")
    done = subprocess.run(
        [*TOOLPROOF, "tools", "list", "--config", str(config), "--json"],
        capture_output=True,
        check=True,
        cwd=tmp_path,
    )
    listed = {tool["name"]: tool.get("idempotency") for tool in json.loads(done.stdout)["tools"]}
    assert listed == {"flaky": "key", "flaky_retry": "key"}


def test_occurrences_count_in_about_8_bytes_a_distinct_call() -> None:
    """200,000 distinct calls, then repeats of some: each counted by its own arguments.

    Past 65,536 distinct keys a table settles them into its sorted array, so repeats of
    settled, recent and re-settled keys all count on.
    """
    occurrences = Occurrences()
    fingerprint = digest(b"fetch v1")
    tracemalloc.start()
    try:
        firsts = {occurrences.next("fetch", fingerprint, digest(b"%d" % n)) for n in range(200_000)}
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert firsts == {1}
    assert current < 8 << 20  # about 1.6 MB sorted + at most 65,536 recent; a dict took 18 MB
    repeats = [occurrences.next("fetch", fingerprint, digest(b"%d" % n)) for n in (0, 199_999, 0)]
    assert repeats == [2, 2, 3]
    assert occurrences.peek("fetch", fingerprint, digest(b"0")) == 4
    assert occurrences.peek("fetch", fingerprint, digest(b"200000")) == 1
    assert occurrences.next("fetch", digest(b"fetch v2"), digest(b"0")) == 1  # another tool
    for n in range(200_000, 270_000):  # settles again, with 0 and 199,999 repeated
        occurrences.next("fetch", fingerprint, digest(b"%d" % n))
    assert occurrences.next("fetch", fingerprint, digest(b"0")) == 4
    assert occurrences.next("fetch", fingerprint, digest(b"199999")) == 3
    assert occurrences.peek("fetch", fingerprint, digest(b"269999")) == 2


@given(st.lists(st.integers(min_value=0, max_value=40), max_size=300))
def test_occurrences_match_a_plain_counter(calls: list[int]) -> None:
    """In any order, repeats and settles included, the n-th call of the same arguments is n."""
    occurrences = Occurrences()
    fingerprint = digest(b"fetch v1")
    seen: dict[int, int] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(idempotency, "_SETTLE_AFTER", 7)
        for n in calls:
            seen[n] = seen.get(n, 0) + 1
            assert occurrences.next("fetch", fingerprint, digest(b"%d" % n)) == seen[n]
