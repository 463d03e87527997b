"""``toolproof call NAME --args JSON --config FILE [--record ROOT]``, in process.

Standard output is exactly one canonical JSON document: the result's value (exit 0) or
the failure (exit 1, also one ``error:`` line on stderr). A bad ``--args`` or an unknown
tool is a one-line usage error (exit 1, nothing on stdout), as every usage error of the
command line is (docs/runs.md exit codes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Ran, toolproof

from toolproof import canonical_json, verify_run

TOOLS = '''\
import toolproof

print("imported")  # a module that prints while it loads: stdout stays one document


@toolproof.tool(read_only=True)
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    print("adding")
    return a + b


@toolproof.tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@toolproof.tool
def subtract(a: int, b: int) -> int:
    """Subtract."""
    return a - b
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text(
        '[[python]]\nmodule = "calc"\n[tools.add]\nextensions = [["retry"]]\n', encoding="utf-8"
    )
    return path


def _call(config: Path, *args: str) -> Ran:
    return toolproof("call", *args, "--config", str(config), cwd=config.parent)


def test_a_call_prints_the_value_as_one_canonical_json_document(config: Path) -> None:
    done = _call(config, "add", "--args", '{"b": 40, "a": 2}')
    assert (done.returncode, done.stdout) == (0, "42\n")
    assert "adding" in done.stderr and "imported" in done.stderr  # never on stdout
    variant = _call(config, "add_retry", "--args", '{"a": 1}')
    assert (variant.returncode, variant.stdout) == (0, "2\n")


def test_without_args_the_arguments_are_the_empty_object(config: Path) -> None:
    done = _call(config, "add")
    assert done.returncode == 1
    failure = json.loads(done.stdout)
    assert failure["kind"] == "invalid_arguments"
    assert failure["detail"]["errors"] == [{"message": '"a" is a required property', "pointer": ""}]


def test_a_failure_prints_its_kind_and_message_as_json_and_exits_1(config: Path) -> None:
    done = _call(config, "add", "--args", '{"a": "2"}')
    assert done.returncode == 1
    failure = json.loads(done.stdout)
    assert done.stdout == canonical_json(failure).decode() + "\n"
    message = "invalid arguments for tool 'add': argument 'a': \"2\" is not of type \"integer\""
    assert (failure["kind"], failure["message"], failure["where"]) == (
        "invalid_arguments",
        message,
        "arguments",
    )
    assert done.stderr.replace("\n", "").endswith(f"error: invalid_arguments: {message}")
    body = _call(config, "explode", "--args", '{"reason": "no fuel"}')
    assert body.returncode == 1
    assert json.loads(body.stdout)["kind"] == "tool_error"
    assert "no fuel" in json.loads(body.stdout)["message"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "{a: 2}",
            "error: --args: not JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)); pass one JSON object, e.g. --args '{\"a\": 2}'",
        ),
        (
            "[2, 3]",
            "error: --args: expected a JSON object of arguments, got an array '[2, 3]'; "
            "pass e.g. --args '{\"a\": 2}'",
        ),
        (
            "null",
            "error: --args: expected a JSON object of arguments, got null; "
            "pass e.g. --args '{\"a\": 2}'",
        ),
        (
            '"x"',
            "error: --args: expected a JSON object of arguments, got a string '\"x\"'; "
            "pass e.g. --args '{\"a\": 2}'",
        ),
    ],
)
def test_bad_args_are_one_line_naming_the_option(config: Path, given: str, message: str) -> None:
    done = _call(config, "add", "--args", given)
    assert (done.returncode, done.stdout, done.stderr.replace("\n", "")) == (1, "", message)
    assert not (config.parent / "runs").exists()


def test_an_unknown_tool_is_named_with_the_close_matches(config: Path) -> None:
    done = _call(config, "ad", "--args", "{}")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"imported\nerror: no tool named 'ad' in {config}; did you mean add?\n"
    far = _call(config, "zzz")
    assert far.stderr == (
        f"imported\nerror: no tool named 'zzz' in {config} "
        "(known: add, add_retry, explode, subtract)\n"
    )


def test_a_variant_of_a_combo_refused_at_its_first_layer_names_the_rule(tmp_path: Path) -> None:
    # retry is refused on subtract (neither read-only nor idempotent): nothing of the
    # combo binds and the quarantine entry names the whole combo, subtract_retry_timeout
    (tmp_path / "calc.py").write_text(TOOLS, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        '[[python]]\nmodule = "calc"\n[tools.subtract]\n'
        'extensions = [["retry", {name = "timeout", config = {seconds = 5}}]]\n',
        encoding="utf-8",
    )
    done = _call(config, "subtract_retry", "--args", '{"a": 3, "b": 1}')
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.replace("\n", "").endswith(
        f"error: tool 'subtract_retry' in {config} is not bound: it is a variant of the "
        "quarantined combo 'subtract_retry_timeout': cannot apply combo [retry, timeout] to "
        "tool 'subtract': 'retry' refused on tool 'subtract': it is marked neither read-only "
        "nor idempotent, nor does it honour the idempotency key (rule: mark the tool "
        'read_only, idempotent or idempotency = "key": @toolproof.tool(read_only=True), '
        '@toolproof.tool(idempotent=True) or @toolproof.tool(idempotency="key") on a Python '
        "function; readOnlyHint or idempotentHint on a declared or MCP tool, or idempotency = "
        '"key" in its [tools.NAME] table; or set config force = true)'
    )


def test_record_writes_one_verifiable_run_and_prints_its_path(config: Path) -> None:
    root = config.parent / "artifacts"
    done = _call(config, "add", "--args", '{"a": 2}', "--record", str(root))
    assert (done.returncode, done.stdout) == (0, "3\n")
    [run] = (root / "runs").iterdir()
    assert f"toolproof: recorded 1 call in {run}" in done.stderr.replace("\n", "")
    assert verify_run(run).ok
    trace = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    calls = [event["call"] for event in trace if event["type"] == "tool_called"]
    assert [(call["tool"], call["arguments"]) for call in calls] == [("add", {"a": 2})]
    assert (run / "spec.json").is_file()
    assert json.loads((run / "spec.json").read_text())["task"] == "toolproof call add"


def test_record_keeps_a_failed_call_in_the_run(config: Path) -> None:
    root = config.parent / "artifacts"
    done = _call(config, "explode", "--args", '{"reason": "no fuel"}', "--record", str(root))
    assert done.returncode == 1
    [run] = (root / "runs").iterdir()
    assert verify_run(run).ok
    assert "no fuel" in (run / "trace.jsonl").read_text()


def test_record_of_an_unknown_tool_records_nothing(config: Path) -> None:
    root = config.parent / "artifacts"
    done = _call(config, "nope", "--record", str(root))
    assert done.returncode == 1
    assert not (root / "runs").exists()
