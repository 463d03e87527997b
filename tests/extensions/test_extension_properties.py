"""Properties of the apply site and its schema comparison, checked with hypothesis."""

from __future__ import annotations

from typing import Any

from ext_support import make_tool, toolset_with
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproof.extensions import ComboElement, ExtensionRegistry, apply_combos
from toolproof.extensions.schema import first_difference

REGISTRY = ExtensionRegistry()
ELEMENTS = {
    "retry": ComboElement("retry", {"backoff": 0}),
    "cache": ComboElement("cache"),
    "timeout": ComboElement("timeout", {"seconds": 5}),
}

# two timeouts in one combo are refused (the second's timeout_s is already an input)
combos = st.lists(
    st.lists(st.sampled_from(sorted(ELEMENTS)), min_size=1, max_size=4).filter(
        lambda combo: combo.count("timeout") <= 1
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(combos)
def test_every_prefix_binds_exactly_once(chosen: list[list[str]]) -> None:
    toolset = toolset_with(make_tool("t"))
    added = apply_combos(
        toolset, "t", [[ELEMENTS[name] for name in combo] for combo in chosen], registry=REGISTRY
    )
    expected = {"t_" + "_".join(combo[:k]) for combo in chosen for k in range(1, len(combo) + 1)}
    assert sorted(tool.name for tool in added) == sorted(expected)
    assert set(toolset.names()) == expected | {"t"}
    assert toolset.quarantined == ()
    for tool in added:
        stack = [layer.name for layer in tool.descriptor().stack]
        assert tool.name == "t_" + "_".join(stack)
        assert tool.descriptor().base == "t"


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=3) | st.dictionaries(
        st.text(max_size=3), children, max_size=3
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=3),
    containers,
    max_leaves=12,
)


def strictly_equal(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(strictly_equal(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(
            strictly_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return bool(left == right)


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_first_difference_is_none_exactly_when_equal(left: Any, right: Any) -> None:
    assert (first_difference(left, right) is None) == strictly_equal(left, right)
    assert first_difference(left, left) is None
