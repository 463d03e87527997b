"""What the outward faces expose: no path around an approval gate (tools/exposure.py)."""

from __future__ import annotations

import asyncio
import itertools
import textwrap
from pathlib import Path

import pytest

from toolproof import ConfigError, Tool, Toolset, load_toolset
from toolproof.contract.tools import StackLayer
from toolproof.errors import UsageError
from toolproof.runs.replay import describe_descriptor_change
from toolproof.tools.exposure import Exposure, is_gated

_COUNTER = itertools.count()
DIGEST = "sha256:" + "0" * 64


def _tool(name: str, *layers: str) -> Tool:
    def body() -> str:
        return name

    base = Tool.from_function(body, name=name)
    if not layers:
        return base
    stack = [StackLayer(name=layer, kind="wrapper", config_digest=DIGEST) for layer in layers]
    root = name.split("_")[0]
    return base.rebind(base.spec, base=root, stack=stack)


def _toolset(*tools: Tool, exposure: Exposure | None = None) -> Toolset:
    toolset = Toolset()
    for tool in tools:
        toolset.add(tool)
    if exposure is not None:
        toolset.set_exposure(exposure)
    return toolset.seal()


TOOLS = (
    _tool("rm"),
    _tool("rm_approve", "approve"),
    _tool("rm_retry", "retry"),
    _tool("rm_retry_approve", "retry", "approve"),
    _tool("rm_approve_cache", "approve", "cache"),
    _tool("ls"),
    _tool("ls_retry", "retry"),
)


def test_a_variant_is_gated_when_its_layer_chain_holds_approve() -> None:
    gated = {tool.name: is_gated(tool) for tool in TOOLS}
    assert gated == {
        "rm": False,
        "rm_approve": True,
        "rm_retry": False,
        "rm_retry_approve": True,
        "rm_approve_cache": True,
        "ls": False,
        "ls_retry": False,
    }


def test_the_ungated_base_and_siblings_of_a_gated_variant_are_hidden() -> None:
    toolset = _toolset(*TOOLS)
    reason = (
        "ungated: rm_approve, rm_approve_cache, rm_retry_approve gates rm "
        "(name it in [serve] expose to show it)"
    )
    assert toolset.hidden() == {"rm": reason, "rm_retry": reason}
    assert [tool.name for tool in toolset.exposed()] == [
        "ls",
        "ls_retry",
        "rm_approve",
        "rm_approve_cache",
        "rm_retry_approve",
    ]
    assert toolset.exposed_tool("rm") is None
    assert toolset.exposed_tool("nope") is None
    assert toolset.exposed_tool("rm_approve") is toolset["rm_approve"]
    assert toolset["rm"].name == "rm"  # still in the Toolset: the gate calls it


def test_expose_lifts_the_gate_rule_and_hide_wins_over_it() -> None:
    policy = Exposure(expose=("rm_retry", "rm"), hide=("rm", "ls_*"))
    toolset = _toolset(*TOOLS, exposure=policy)
    assert toolset.hidden() == {"ls_retry": "[serve] hide 'ls_*'", "rm": "[serve] hide 'rm'"}
    assert "rm_retry" in [tool.name for tool in toolset.exposed()]


def test_hide_can_hide_a_gated_variant_too() -> None:
    toolset = _toolset(*TOOLS, exposure=Exposure(hide=("*_cache",)))
    assert sorted(toolset.hidden()) == ["rm", "rm_approve_cache", "rm_retry"]


def test_the_descriptor_records_the_policy_and_the_hidden_names() -> None:
    descriptor = _toolset(*TOOLS, exposure=Exposure(expose=("rm_retry",))).descriptor()
    assert descriptor.exposure is not None
    assert descriptor.to_json()["exposure"] == {
        "schema_version": 1,
        "expose": ["rm_retry"],
        "hide": [],
        "hidden": ["rm"],
    }
    other = _toolset(*TOOLS).descriptor()
    assert other.exposure is not None and other.exposure.hidden == ["rm", "rm_retry"]
    assert other.id != descriptor.id


def test_without_a_gate_or_globs_the_descriptor_is_what_it_was() -> None:
    ungated = [tool for tool in TOOLS if not tool.name.startswith("rm")]
    descriptor = _toolset(*ungated).descriptor()
    assert descriptor.exposure is None
    assert "exposure" not in descriptor.to_json()
    assert _toolset(*ungated).hidden() == {}


def test_globs_matching_no_name_are_reported_in_order() -> None:
    policy = Exposure(expose=("rm", "zz*"), hide=("ls", "q?"))
    assert policy.unmatched(["rm", "ls"]) == [("expose", 1, "zz*"), ("hide", 1, "q?")]


def test_the_policy_cannot_change_after_sealing() -> None:
    toolset = _toolset(*TOOLS)
    with pytest.raises(UsageError, match=r"cannot set its exposure policy after seal\(\)"):
        toolset.set_exposure(Exposure(hide=("rm",)))


MODULE = '''
import toolproof

@toolproof.tool
def debug_dump() -> str:
    """Dump state."""
    return "state"

@toolproof.tool
def status() -> str:
    """Report status."""
    return "ok"
'''


def _config(tmp_path: Path, serve: str) -> Path:
    name = f"tp_exposure_tools_{next(_COUNTER)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    text = f"""
        [[python]]
        module = "{name}"

        [serve]
        {serve}
    """
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _load(path: Path) -> Toolset:
    async def go() -> Toolset:
        async with load_toolset(path) as toolset:
            return toolset

    return asyncio.run(go())


def test_serve_hide_in_the_config_hides_and_is_in_the_descriptor(tmp_path: Path) -> None:
    toolset = _load(_config(tmp_path, 'hide = ["debug_*"]'))
    assert toolset.hidden() == {"debug_dump": "[serve] hide 'debug_*'"}
    assert [tool.name for tool in toolset.exposed()] == ["status"]
    exposure = toolset.descriptor().exposure
    assert exposure is not None
    assert (exposure.expose, exposure.hide, exposure.hidden) == ([], ["debug_*"], ["debug_dump"])


def test_an_unknown_serve_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(_config(tmp_path, 'exposed = ["status"]'))
    assert caught.value.fields["key"] == "serve.exposed"
    assert caught.value.fields["rule"] == (
        "unknown key (not part of the toolproof.toml format); did you mean 'expose'?"
    )


def test_a_serve_glob_matching_no_tool_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(_config(tmp_path, 'expose = ["status"]\nhide = ["debug-*"]'))
    assert caught.value.fields["key"] == "serve.hide[0]"
    assert caught.value.fields["rule"] == (
        "glob 'debug-*' matches no tool (tools: debug_dump, status; rule: each [serve] glob "
        "names at least one tool, so a misspelt one is noticed)"
    )


def test_an_empty_serve_glob_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(_config(tmp_path, 'hide = [" "]'))
    assert caught.value.fields["key"] == "serve.hide"
    assert caught.value.fields["rule"] == "an empty glob matches no tool name"


def test_a_replay_names_a_change_of_exposure() -> None:
    before = _toolset(*TOOLS).descriptor()
    after = _toolset(*TOOLS, exposure=Exposure(expose=("rm_retry",))).descriptor()
    assert describe_descriptor_change(before, after) == (
        "the exposure changed (hidden: rm, rm_retry -> hidden: rm)"
    )
