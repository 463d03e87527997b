"""``toolproof tools lint``: the tool-description lint of a composition root.

Loads the tools without the lock (it lints what the sources offer), and reports every
base tool's findings at bind (:mod:`toolproof.tools.lint`), also those of the tools the
lint quarantined. Exit 0: no finding at or above ``fail_on`` (``[lint] fail_on``, or
``--fail-on``); 2: at least one; 1: the config cannot be loaded or an option is
wrong (docs/runs.md). See ``docs/lint.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from toolproof.adapters.cli.app import emit_json, exit_for, out_console, run_async
from toolproof.adapters.cli.options import ConfigOption, JsonOption
from toolproof.errors import InputError, VerificationError

if TYPE_CHECKING:
    from toolproof.tools.lint import Allow, FailOn, Finding

__all__ = ["lint_document", "lint_tools"]


def lint_document(
    config: Path,
    report: dict[str, tuple[Finding, ...]],
    fail_on: FailOn,
    allow: Sequence[Allow] = (),
) -> dict[str, Any]:
    """The ``--json`` document of a lint report.

    Returns:
        ``{"config", "fail_on", "tools" (how many were linted), "counts": {"high",
        "medium", "low"}, "failing": [tool names with a finding at or above fail_on],
        "findings": [Finding.to_json() + "allowed"...]}``, findings by tool, then field,
        then offset (``allowed``: a ``[[lint.allow]]`` entry lets it pass);
        each ``field`` escaped as its ``text`` is (:func:`escape_text`), so a pointer to a
        property name holding an invisible character never renders either.

    """
    from toolproof.tools.lint import Severity, escape_text
    from toolproof.tools.lint_toolset import failing_findings

    findings = [finding for name in sorted(report) for finding in report[name]]
    failing = sorted({f.tool for f in failing_findings(findings, fail_on, allow)})
    return {
        "config": str(config),
        "fail_on": fail_on.value,
        "tools": len(report),
        "counts": {
            level.value: sum(1 for f in findings if f.severity is level) for level in Severity
        },
        "failing": failing,
        "findings": [
            {
                **finding.to_json(),
                "field": escape_text(finding.field),
                "allowed": any(entry.allows(finding) for entry in allow),
            }
            for finding in findings
        ],
    }


def _print(document: dict[str, Any]) -> None:
    for item in document["findings"]:
        part = " (member name)" if item["key"] else ""
        where = f"{item['field'] or '/'}{part}"
        offsets = f"char {item['offset']} (byte {item['byte_offset']})"
        head = f"{item['severity'].upper():6}  {item['rule']}  {item['tool']}"
        offsets += "  (allowed by [[lint.allow]])" if item["allowed"] else ""
        out_console.print(Text(f"{head}  {where}  {offsets}"))
        out_console.print(Text(f'        "{item["text"]}": {item["message"]}'))
    counts = document["counts"]
    shown = ", ".join(f"{counts[level]} {level}" for level in ("high", "medium", "low"))
    tools = len({item["tool"] for item in document["findings"]})
    summary = (
        f"{len(document['findings'])} findings ({shown}) in {tools} of {document['tools']} tools"
    )
    failing = document["failing"]
    verdict = (
        f"{len(failing)} tools at or above fail_on = {document['fail_on']!r} "
        f"(quarantined at load): {', '.join(failing)}"
        if failing
        else f"none at or above fail_on = {document['fail_on']!r}"
    )
    out_console.print(Text(f"{summary}; {verdict}"))


def lint_tools(
    config: Path = ConfigOption,
    as_json: bool = JsonOption,
    fail_on: str | None = typer.Option(
        None,
        "--fail-on",
        help="high | medium | low | never: the least severity that exits 2 "
        "(default: \\[lint] fail_on of the config, itself 'high' by default).",
    ),
) -> None:
    """Lint every tool's name, title, description and schemas; exit 2 on findings at fail_on."""
    from toolproof.tools.lint import FailOn

    threshold: FailOn | None = None
    if fail_on is not None:
        try:
            threshold = FailOn(fail_on)
        except ValueError:
            choices = ", ".join(level.value for level in FailOn)
            raise InputError(f"--fail-on {fail_on!r} is not one of {choices}") from None

    async def load() -> tuple[dict[str, tuple[Finding, ...]], FailOn, list[Allow]]:
        from toolproof.config import CONFIG, ToolproofConfig, load_toolset
        from toolproof.tools.lint_toolset import LINT_FINDINGS

        async with load_toolset(config, lock=False) as toolset:
            parsed: ToolproofConfig = toolset.resources[CONFIG]
            allow = [entry.allow() for entry in parsed.lint.allow]
            return toolset.resources[LINT_FINDINGS], threshold or parsed.lint.fail_on, allow

    report, level, allow = run_async(load())
    document = lint_document(config, report, level, allow)
    if as_json:
        emit_json(document)
    else:
        _print(document)
    if document["failing"]:
        raise exit_for(VerificationError)
