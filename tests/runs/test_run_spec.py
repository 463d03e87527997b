from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from runs_support import Counter, base_spec, make_toolset

from toolproof.contract.runs import RunSpec
from toolproof.errors import ConfigError, InputError
from toolproof.runs.planner import PLANNER, plan_run
from toolproof.runs.spec import iter_refs, load_spec, parse_spec, resolve_refs

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence" / "spec.toml"


def test_example_spec_loads_with_toolset_beside_it() -> None:
    loaded = load_spec(EXAMPLE)
    assert loaded.spec.policy == "strict"
    assert [step.id for step in loaded.spec.steps] == ["apples", "plums", "fruit"]
    assert loaded.toolset_path == EXAMPLE.parent / "toolproof.toml"
    assert loaded.spec.budgets.tool_calls == 10


def test_json_spec_loads(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(base_spec()), encoding="utf-8")
    assert load_spec(path).spec.task == "Count the fruit."


def test_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text('task = "t"\ncolour = "red"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert info.value.fields["key"] == "colour"
    assert info.value.fields["rule"] == "unknown key (not part of the run spec format)"


def test_unknown_step_key_is_refused() -> None:
    raw = base_spec()
    raw["steps"][0]["retries"] = 3
    with pytest.raises(ConfigError) as info:
        parse_spec(raw, "s.toml")
    assert str(info.value) == (
        "s.toml: steps[0].retries: unknown key (not part of the run spec format)"
    )


def test_missing_task_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"task: required key is missing"):
        parse_spec({}, "s.toml")


@pytest.mark.parametrize("toolset", ["../toolproof.toml", "/etc/toolproof.toml", "a\\b.toml"])
def test_toolset_path_must_be_relative_posix(toolset: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(base_spec(toolset=toolset), "s.toml")
    assert info.value.fields["key"] == "toolset"


def test_reserved_step_id_is_refused() -> None:
    raw = base_spec(steps=[{"id": "finalize", "tool": "stock", "arguments": {}}])
    with pytest.raises(ConfigError, match="reserved for the planner"):
        parse_spec(raw, "s.toml")


def test_ref_with_extra_keys_is_refused() -> None:
    raw = base_spec()
    raw["steps"][2]["arguments"] = {"items": {"$ref": "steps.apples.value", "x": 1}}
    with pytest.raises(ConfigError, match="exactly one key, '\\$ref'"):
        parse_spec(raw, "s.toml")


def test_malformed_ref_is_refused() -> None:
    raw = base_spec()
    raw["steps"][2]["arguments"] = {"items": {"$ref": "apples.count"}}
    with pytest.raises(ConfigError, match=re.escape("not of the form 'steps.<step id>.value")):
        parse_spec(raw, "s.toml")


def test_resolve_refs_follows_keys_and_indices() -> None:
    values = {"a": {"hits": [{"text": "x"}, {"text": "y"}]}}
    resolved = resolve_refs({"q": [{"$ref": "steps.a.value.hits.1.text"}, 3]}, values)
    assert resolved == {"q": ["y", 3]}


def test_resolve_refs_names_missing_key() -> None:
    with pytest.raises(InputError, match="'nope' not found in the result"):
        resolve_refs({"$ref": "steps.a.value.nope"}, {"a": {"b": 1}})


def _plan(raw: dict[str, object]) -> object:
    return plan_run(RunSpec.model_validate(raw), make_toolset(Counter()).descriptor())


def test_plan_orders_by_dependencies_then_spec_order() -> None:
    raw = base_spec()
    raw["steps"] = [raw["steps"][2], raw["steps"][0], raw["steps"][1]]
    plan = plan_run(RunSpec.model_validate(raw), make_toolset(Counter()).descriptor())
    assert [node.id for node in plan.nodes] == [
        "apples",
        "plums",
        "fruit",
        "derive",
        "verify",
        "finalize",
    ]
    assert plan.node("fruit").depends_on == ["apples", "plums"]
    assert ["apples", "fruit"] in plan.edges
    assert plan.planner == PLANNER
    assert plan.id.startswith("plan_")


def test_plan_id_is_stable_and_content_addressed() -> None:
    first = _plan(base_spec())
    assert first == _plan(base_spec())
    assert first != _plan(base_spec(task="Another task."))


def test_cycle_is_refused_naming_steps() -> None:
    raw = base_spec()
    raw["steps"][0]["after"] = ["fruit"]
    with pytest.raises(InputError) as info:
        _plan(raw)
    assert info.value.message.startswith("steps ['apples', 'fruit'] form a dependency cycle")


def test_unknown_dependency_is_refused() -> None:
    raw = base_spec()
    raw["steps"][0]["after"] = ["ghost"]
    with pytest.raises(InputError, match="step 'apples' depends on unknown step 'ghost'"):
        _plan(raw)


def test_duplicate_step_id_is_refused() -> None:
    raw = base_spec()
    raw["steps"][1]["id"] = "apples"
    with pytest.raises(InputError, match="step id 'apples' is used twice"):
        _plan(raw)


def test_unknown_tool_is_refused() -> None:
    raw = base_spec()
    raw["steps"][0]["tool"] = "stocks"
    with pytest.raises(InputError) as info:
        _plan(raw)
    assert info.value.message == (
        "step 'apples' calls unknown tool 'stocks' (the toolset has: slow, stock, text, total)"
    )


def test_retrieve_step_needs_a_handler() -> None:
    raw = base_spec(steps=[{"id": "search", "kind": "retrieve", "params": {"query": "x"}}])
    with pytest.raises(InputError, match="no retrieve runtime is configured"):
        _plan(raw)


def _deep(depth: int) -> Any:
    value: Any = {"$ref": "steps.a.value.x"}
    for _ in range(depth):
        value = [value]
    return value


def test_references_are_found_and_resolved_however_deep() -> None:
    # iterative walks: a million levels is a loop, never a RecursionError (issue 12 item 9)
    deep = _deep(1_000_000)
    assert list(iter_refs({"q": deep})) == ["steps.a.value.x"]
    resolved = resolve_refs({"q": _deep(5000)}, {"a": {"x": 7}})
    for _ in range(5000):
        (resolved,) = resolved if isinstance(resolved, list) else resolved["q"]
    assert resolved == 7


def test_a_spec_file_nested_too_deeply_to_parse_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value).endswith("nested too deeply to parse (arrays or tables thousands deep)")


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def test_a_folder_given_as_the_spec_is_named_as_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_spec(tmp_path)
    assert str(info.value) == f"{tmp_path}: (file): is a folder; give the spec file in it"
