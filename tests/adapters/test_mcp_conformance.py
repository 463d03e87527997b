"""The official MCP conformance suite against ``toolproof serve``, natively and as a proxy.

``@modelcontextprotocol/conformance`` (pinned in ``.ci/services``, run with its pinned
Node 24 through ``conformance_support``) runs each frozen server requirement set
(``--requirements 2025-11-25`` and ``2026-07-28``) against ``toolproof serve --http``:

* **native**: ``tests/fixtures/conformance/native.toml``, the scenarios as Python tools,
  resources and prompts;
* **proxy**: an ``[[mcp]]`` import (``prefix = ""``) of that same native server, started
  as ``toolproof serve`` over stdio: the proxy has the same tools, relayed.

The test asserts the exact pass set: every scenario of the set passes except those
``BASELINE`` names (each with the reason the suite's own reference server fails it too)
and those ``OPEN`` names (failures still to fix, with why); the table in
``docs/serve.md`` shows exactly what was measured, and the summaries in it and in
``docs/mcp.md`` count that table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conformance_support import REVISIONS, SuiteRun, required, run_server
from serve_helpers import TOOLPROOF, free_port, spawn

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "conformance"
DOCS = (ROOT / "docs" / "serve.md",)
TABLE_START = "<!-- conformance server table -->"
SUMMARY_START = "<!-- conformance summary -->"
SUMMARIES = (ROOT / "docs" / "serve.md", ROOT / "docs" / "mcp.md")
COLUMNS = ("native", "proxy")
BASELINE: dict[str, dict[str, str]] = {revision: {} for revision in REVISIONS}
"""``{revision: {scenario: reason}}``: the scenarios toolproof may fail, each only where the
suite's own reference server fails it too, with why. None: toolproof fails no scenario of
either set. (The reference ``everything-server``, from the suite's source repository and not
measured here, fails the seven ``tools-call-*`` scenarios of 2026-07-28 other than logging:
its ``CallToolResult`` lacks ``resultType``; toolproof passes them. ``docs/serve.md``.)"""
OPEN: dict[tuple[str, str], dict[str, str]] = {}
"""``{(column, revision): {scenario: reason}}``: failures the reference does not share, so
not baselined; listed so that the exact pass set is asserted and a fix shows."""


def proxy_config(tmp_path: Path) -> Path:
    """An ``[[mcp]]`` import of the native conformance server (``toolproof serve`` over stdio)."""
    config = tmp_path / "proxy.toml"
    args = [*TOOLPROOF[1:], "serve", "--config", str(FIXTURES / "native.toml")]
    config.write_text(
        "[[mcp]]\n"
        'name = "native"\n'
        f"command = {_toml(sys.executable)}\n"
        f"args = [{', '.join(_toml(arg) for arg in args)}]\n"
        'prefix = ""\n',
        encoding="utf-8",
    )
    return config


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def doc_table(doc: Path) -> dict[tuple[str, str], dict[str, str]]:
    """``{(revision, column): {scenario: cell}}`` from the table after ``TABLE_START``.

    Its header is ``scenario`` and one ``REVISION COLUMN`` per measured leg; a cell is
    ``PASS``, ``FAIL`` or ``—`` (not in that revision's set).
    """
    rows = doc.read_text(encoding="utf-8").split(TABLE_START, 1)[1].strip().splitlines()
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[0] == "scenario", header
    keys = [(head.split()[0], head.split()[1]) for head in header[1:]]
    table: dict[tuple[str, str], dict[str, str]] = {key: {} for key in keys}
    for row in rows[2:]:
        if not row.startswith("|"):
            break
        scenario, *cells = (cell.strip().strip("`") for cell in row.strip("|").split("|"))
        for key, cell in zip(keys, cells, strict=True):
            if cell != "—":
                table[key][scenario] = cell
    return table


def measure(column: str, revision: str, tmp_path: Path) -> SuiteRun:
    config = proxy_config(tmp_path) if column == "proxy" else FIXTURES / "native.toml"
    port = free_port()
    with spawn(["serve", "--config", str(config), "--http", f"127.0.0.1:{port}"], port):
        return run_server(f"http://127.0.0.1:{port}/mcp", revision, tmp_path / "results")


@pytest.mark.service
@pytest.mark.timeout(300)
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("column", COLUMNS)
def test_serve_passes_the_requirement_set_but_its_baseline(
    column: str, revision: str, tmp_path: Path
) -> None:
    run = measure(column, revision, tmp_path)
    baseline = {**BASELINE[revision], **OPEN.get((column, revision), {})}
    assert set(baseline) <= set(run.scored), sorted(set(baseline) - set(run.scored))
    expected = set(run.scored) - set(baseline)
    assert run.passed() == expected, f"{column} {revision}:\n{run.report()}"
    for doc in DOCS:
        shown = doc_table(doc)[(revision, column)]
        assert shown == {name: "PASS" if name in expected else "FAIL" for name in run.scored}, doc


def test_the_docs_table_fails_exactly_the_baseline_and_the_open_scenarios() -> None:
    # without the suite: each leg of docs/serve.md's table shows FAIL for exactly the
    # scenarios BASELINE and OPEN name (today none), each named with its reason
    assert set(BASELINE) == set(REVISIONS), sorted(BASELINE)
    assert set(OPEN) <= {(column, revision) for column in COLUMNS for revision in REVISIONS}
    table = doc_table(DOCS[0])
    assert sorted(table) == sorted(
        (revision, column) for revision in REVISIONS for column in COLUMNS
    )
    for (revision, column), cells in table.items():
        allowed = {**BASELINE[revision], **OPEN.get((column, revision), {})}
        failing = {name for name, cell in cells.items() if cell != "PASS"}
        assert set(cells.values()) <= {"PASS", "FAIL"}, (revision, column, cells)
        assert failing == set(allowed), (revision, column, sorted(failing))
        assert all(len(reason) > 40 for reason in allowed.values()), allowed


@pytest.mark.service
def test_the_docs_tables_list_each_requirement_set() -> None:
    for doc in DOCS:
        table = doc_table(doc)
        for revision in REVISIONS:
            for column in COLUMNS:
                assert sorted(table[(revision, column)]) == sorted(required("server", revision))


def summary_rows(doc: Path) -> dict[str, str]:
    """``{revision: toolproof cell}`` of the server rows of the summary after ``SUMMARY_START``."""
    rows = doc.read_text(encoding="utf-8").split(SUMMARY_START, 1)[1].strip().splitlines()
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:6]]
    return {row[1].split()[0]: row[3] for row in cells if row[0] == "server"}


def test_the_summaries_count_the_scenario_table() -> None:
    table = doc_table(DOCS[0])
    for doc in SUMMARIES:
        rows = summary_rows(doc)
        assert sorted(rows) == sorted(REVISIONS), doc
        for revision in REVISIONS:
            counts = [
                f"{column} {sum(c == 'PASS' for c in cells.values())}/{len(cells)}"
                for column in COLUMNS
                for cells in [table[(revision, column)]]
            ]
            assert rows[revision].startswith(", ".join(counts)), (doc, rows[revision])
