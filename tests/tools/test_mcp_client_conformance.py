"""The official MCP conformance suite against the ``[[mcp]]`` client.

``@modelcontextprotocol/conformance`` (pinned in ``.ci/services``, run with its pinned
Node 24 through ``conformance_support``) runs each scenario of the frozen client
requirement sets (2025-11-25 and 2026-07-28) against
``tests/fixtures/conformance/mcp_client.py``: a thin script that uses only toolproof's
public path (a ``toolproof.toml`` with one ``[[mcp]]`` entry, ``mcp_login`` for the
OAuth scenarios, ``load_toolset`` and tool calls). The auth scenarios put toolproof's
OAuth client (the SDK's ``OAuthClientProvider`` under ``[mcp.auth]``) through
discovery, PKCE, CIMD and dynamic registration, pre-registration, scope selection and
step-up, ``iss`` checks and an authorization-server migration.

Each scenario runs alone (``--scenario S --spec-version REVISION``), at most ``AT_ONCE``
at a time: the set run all at once starts every client together, and on a loaded machine a
client that takes 30 s to import toolproof is a timeout, not a verdict. The test asserts the
exact pass set: every scenario passes except those ``BASELINE`` names, each with the
reason the suite's own reference client fails it too (none: toolproof passes all), and
the table in ``docs/mcp.md`` shows exactly what was measured.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conformance_support import REVISIONS, required, run_client

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "fixtures" / "conformance" / "mcp_client.py"
DOC = ROOT / "docs" / "mcp.md"
TABLE_START = "<!-- conformance client table -->"
CLIENT_SECONDS = 150.0
"""Seconds one scenario's client may take (toolproof's import on a loaded machine)."""
AT_ONCE = 3
"""Scenarios run at the same time (each its own suite process, scenario server and client)."""
BASELINE: dict[str, dict[str, str]] = {revision: {} for revision in REVISIONS}
"""``{revision: {scenario: reason}}``: the scenarios toolproof may fail, each only where the
suite's own reference client fails it too, with why."""


def command() -> str:
    """The client command line (the suite splits it on spaces and appends the URL)."""
    parts = ["env", f"PYTHONPATH={ROOT / 'src'}", sys.executable, str(CLIENT)]
    assert not [part for part in parts if " " in part], parts
    return " ".join(parts)


def measure(revision: str, tmp_path: Path) -> tuple[dict[str, bool], dict[str, list[str]]]:
    """``({scenario: passed}, {scenario: failing checks})`` over ``revision``'s client set."""
    scenarios = required("client", revision)

    def one(index: int) -> tuple[bool, list[str]]:
        scenario = scenarios[index]
        run = run_client(
            command(),
            revision,
            tmp_path / f"scenario-{index}",
            scenario=scenario,
            client_timeout=CLIENT_SECONDS,
        )
        passed = bool(run.results.get(scenario))
        return passed, [] if passed else [
            *run.failures.get(scenario, ["no result"]),
            run.output[-2000:],
        ]

    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        outcomes = list(pool.map(one, range(len(scenarios))))
    results = {scenario: passed for scenario, (passed, _) in zip(scenarios, outcomes, strict=True)}
    failures = {
        scenario: why
        for scenario, (passed, why) in zip(scenarios, outcomes, strict=True)
        if not passed
    }
    return results, failures


def doc_table() -> dict[str, dict[str, str]]:
    """``{revision: {scenario: cell}}`` from the table after ``TABLE_START`` (``—``: not in it)."""
    rows = DOC.read_text(encoding="utf-8").split(TABLE_START, 1)[1].strip().splitlines()
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[0] == "scenario", header
    table: dict[str, dict[str, str]] = {revision: {} for revision in header[1:]}
    for row in rows[2:]:
        if not row.startswith("|"):
            break
        scenario, *cells = (cell.strip().strip("`") for cell in row.strip("|").split("|"))
        for revision, cell in zip(header[1:], cells, strict=True):
            if cell != "—":
                table[revision][scenario] = cell
    return table


@pytest.mark.service
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("revision", REVISIONS)
def test_the_mcp_client_passes_the_client_requirement_set_but_its_baseline(
    revision: str, tmp_path: Path
) -> None:
    results, failures = measure(revision, tmp_path)
    baseline = BASELINE[revision]
    scored = required("client", revision)
    assert set(baseline) <= set(scored), sorted(set(baseline) - set(scored))
    expected = {name: name not in baseline for name in scored}
    assert results == expected, failures
    shown = doc_table()[revision]
    assert shown == {name: "PASS" if passed else "FAIL" for name, passed in results.items()}


def test_the_baseline_names_a_reason_for_each_scenario() -> None:
    reasons = [reason for revision in REVISIONS for reason in BASELINE[revision].values()]
    assert all(len(reason) > 40 for reason in reasons), reasons


@pytest.mark.service
def test_the_docs_table_lists_each_client_requirement_set() -> None:
    table = doc_table()
    assert sorted(table) == sorted(REVISIONS)
    for revision in REVISIONS:
        assert sorted(table[revision]) == sorted(required("client", revision))
