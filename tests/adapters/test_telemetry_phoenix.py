"""toolproof's spans through a real trace store: Arize Phoenix (issue 20, point 6).

``.ci/services`` runs ``phoenix serve`` (``arize-phoenix`` 20.26.1, SQLite, no network)
on 127.0.0.1:8033 (``TOOLPROOF_PHOENIX_URL`` points elsewhere). The tests export
OTLP/HTTP to its ``/v1/traces`` and read the spans back through its REST API
(``GET /v1/projects/{project}/spans`` and ``.../spans/otlpv1``), each test in a project
of its own (the ``openinference.project.name`` resource attribute), so a server that
outlives many runs never mixes them up.

What Phoenix does to the spans is pinned too: it keeps every attribute, names and ids
as sent, and adds the OpenInference ones it derives from ``gen_ai.*`` (``tool.name``,
``tool.id``, ``tool.description``, ``openinference.span.kind = TOOL``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolproof
from toolproof import Tool
from toolproof.identity import digest_json

pytestmark = [pytest.mark.service, pytest.mark.timeout(300)]

BASE_URL = os.environ.get("TOOLPROOF_PHOENIX_URL", "http://127.0.0.1:8033")
TOOLPROOF = str(Path(sys.executable).parent / "toolproof")


def _phoenix() -> None:
    try:
        httpx.get(f"{BASE_URL}/healthz", timeout=10).raise_for_status()
    except httpx.HTTPError as exc:
        message = f"no Phoenix at {BASE_URL} ({exc}); run .ci/services"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _spans(project: str, count: int, flavour: str = "") -> list[dict[str, Any]]:
    """The project's spans once ``count`` have landed (Phoenix inserts in the background)."""
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.get(f"{BASE_URL}/v1/projects/{project}/spans{flavour}", timeout=30)
        if answer.status_code == 200:
            data: list[dict[str, Any]] = answer.json()["data"]
            if len(data) >= count or time.monotonic() > deadline:
                return data
        elif answer.status_code != 404 or time.monotonic() > deadline:
            raise AssertionError(f"{answer.status_code} {answer.text}")
        time.sleep(0.25)


def _camel(key: str) -> str:
    return re.sub(r"_([a-z])", lambda match: match.group(1).upper(), key)


def _otlp_json(value: Any) -> Any:
    """Phoenix's ``otlpv1`` span (snake_case keys, nulls) as the OTLP JSON mapping."""
    if isinstance(value, dict):
        return {_camel(key): _otlp_json(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_otlp_json(item) for item in value]
    return value


def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


def test_a_tool_call_exported_to_phoenix_reads_back_with_its_attributes_and_parent() -> None:
    _phoenix()
    project = f"toolproof-{uuid.uuid4().hex}"
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    exporter = OTLPSpanExporter(endpoint=f"{BASE_URL}/v1/traces", timeout=30)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    toolproof.instrument(tracer_provider=provider)
    tool = Tool.from_function(add)
    try:
        with provider.get_tracer("caller").start_as_current_span("agent turn") as caller:
            ok = asyncio.run(tool.call({"a": 1}))
            bad = asyncio.run(tool.call({"a": "one"}))
        provider.force_flush()
    finally:
        toolproof.adapters.telemetry.instrument.uninstrument()
        provider.shutdown()
    assert (ok.value, bad.failure is not None) == (2, True)
    assert bad.failure is not None
    trace_id = f"{caller.get_span_context().trace_id:032x}"
    caller_id = f"{caller.get_span_context().span_id:016x}"
    spans = sorted(_spans(project, 3), key=lambda span: span["start_time"])
    assert [span["name"] for span in spans] == [
        "agent turn",
        "execute_tool add",
        "execute_tool add",
    ]
    assert {span["context"]["trace_id"] for span in spans} == {trace_id}
    assert [span["parent_id"] for span in spans] == [None, caller_id, caller_id]
    assert [span["span_kind"] for span in spans] == ["UNKNOWN", "TOOL", "TOOL"]
    assert [span["status_code"] for span in spans] == ["UNSET", "UNSET", "ERROR"]
    good, failed = spans[1]["attributes"], spans[2]["attributes"]
    call_id = good["gen_ai.tool.call.id"]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call_id), call_id
    assert good == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "gen_ai.tool.call.id": call_id,
        "toolproof.arguments_digest": digest_json({"a": 1}),
        "toolproof.result_digest": digest_json(2),
        # what Phoenix derives from gen_ai.* (OpenInference names)
        "tool.name": "add",
        "tool.id": call_id,
        "tool.description": "Add two integers.",
    }
    assert failed["error.type"] == bad.failure.kind == "invalid_arguments"
    assert failed["toolproof.arguments_digest"] == digest_json({"a": "one"})
    assert "toolproof.result_digest" not in failed
    assert "toolproof.arguments" not in good  # content is off by default


CLI_TOOLS = '''
import toolproof


@toolproof.tool(read_only=True)
def lookup(item: str) -> dict:
    """Look an item up."""
    return {"item": item, "count": len(item)}
'''


def test_a_run_exported_to_phoenix_reads_back_as_otlp_and_verifies(tmp_path: Path) -> None:
    """``toolproof run`` with ``[telemetry] enabled`` sends to Phoenix; its ``otlpv1``
    answer, as OTLP JSON, checks against the sealed run, and a forged digest does not."""
    _phoenix()
    project = f"toolproof-{uuid.uuid4().hex}"
    (tmp_path / "cli_tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    (tmp_path / "toolproof.toml").write_text(
        '[[python]]\nmodule = "cli_tools"\n\n[telemetry]\nenabled = true\n', encoding="utf-8"
    )
    (tmp_path / "spec.toml").write_text(
        'task = "t"\n[[steps]]\nid = "look"\ntool = "lookup"\narguments = { item = "pear" }\n',
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{BASE_URL}/v1/traces",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }
    ran = subprocess.run(
        [TOOLPROOF, "run", str(tmp_path / "spec.toml"), "--root", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    spans = _spans(project, 5, "/otlpv1")
    by_name = {span["name"]: span for span in spans}
    assert sorted(by_name) == [
        "execute_tool lookup",
        "toolproof.run",
        "toolproof.step derive",
        "toolproof.step look",
        "toolproof.step verify",
    ]
    run_span = by_name["toolproof.run"]
    assert run_span["parent_span_id"] is None
    for name in ("toolproof.step derive", "toolproof.step look", "toolproof.step verify"):
        assert by_name[name]["parent_span_id"] == run_span["span_id"], name
    tool_span = by_name["execute_tool lookup"]
    assert tool_span["parent_span_id"] == by_name["toolproof.step look"]["span_id"]
    assert {span["trace_id"] for span in spans} == {run_span["trace_id"]}
    attributes = {item["key"]: item["value"]["string_value"] for item in run_span["attributes"]}
    assert attributes["toolproof.run_id"] == run_id
    assert attributes["toolproof.report.outcome"] == "passed"
    tool = {item["key"]: item["value"]["string_value"] for item in tool_span["attributes"]}
    assert tool["gen_ai.tool.name"] == "lookup"
    assert tool["toolproof.result_digest"] == digest_json({"item": "pear", "count": 4})
    assert tool["openinference.span.kind"] == "TOOL"

    raw = tmp_path / "phoenix.json"
    raw.write_text(json.dumps({"data": spans}), encoding="utf-8")
    verify = [TOOLPROOF, "verify", str(tmp_path / "runs" / run_id), "--otel-spans"]
    refused = subprocess.run(
        [*verify, str(raw)], capture_output=True, text=True, timeout=120, check=False
    )
    assert refused.returncode == 1
    assert "not an OTLP JSON trace export" in refused.stderr
    export = tmp_path / "spans.json"
    document = {"resourceSpans": [{"scopeSpans": [{"spans": _otlp_json(spans)}]}]}
    export.write_text(json.dumps(document), encoding="utf-8")
    done = subprocess.run(
        [*verify, str(export)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "otel spans: 1 span of 5 match 1 recorded call" in done.stdout
    for item in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for attribute in item["attributes"]:
            if attribute["key"] == "toolproof.result_digest":
                attribute["value"]["stringValue"] = digest_json({"item": "pear", "count": 5})
    export.write_text(json.dumps(document), encoding="utf-8")
    forged = subprocess.run(
        [*verify, str(export)], capture_output=True, text=True, timeout=120, check=False
    )
    assert forged.returncode == 2
    assert "execute_tool lookup" in forged.stderr
    assert "toolproof.result_digest is" in forged.stderr
