"""The apply site: prefix binding, names, every refusal with its exact message."""

from __future__ import annotations

from typing import Any

import pytest
from ext_support import apply, elements, make_tool, refusal, run, toolset_with

from toolproof import ExtensionError, ExtensionKind, Tool, ToolResult
from toolproof.extensions import (
    ExtensionRegistry,
    build_combo,
    register_extension,
    transformer,
    wrapper,
)
from toolproof.extensions.decorators import call_next_for
from toolproof.identity import digest_json

REGISTERED = "approve, args, audit, cache, project, rate_limit, retry, timeout"
SCHEMA_RULE = "(rule: a wrapper presents its input's schema unchanged, minus its reserved params)"


def passthrough(inner: Tool, *, name: str, config: Any) -> Tool:
    return Tool(inner.spec.model_copy(update={"name": name}), inner.run_validated)


def schema_changing(change: Any) -> Any:
    def factory(inner: Tool, *, name: str, config: Any) -> Tool:
        schema = change(dict(inner.spec.input_schema))
        spec = inner.spec.model_copy(update={"name": name, "input_schema": schema})
        return Tool(spec, inner.run_validated)

    return factory


def registry_with(*specs: tuple[str, str, Any], **options: Any) -> ExtensionRegistry:
    registry = ExtensionRegistry()
    for kind, name, factory in specs:
        register_extension(factory, kind=kind, name=name, registry=registry, **options)
    return registry


def test_combo_binds_every_prefix_and_b_wraps_a_wraps_t() -> None:
    order: list[str] = []
    registry = ExtensionRegistry()
    for label in ("a", "b"):

        async def note(call_next: Any, arguments: Any, config: Any, label: str = label) -> Any:
            order.append(label)
            return await call_next(arguments)

        wrapper(note, name=label, registry=registry)
    toolset = toolset_with(make_tool("t"))
    assert apply(toolset, "t", elements("a", "b"), registry=registry) == ["t_a", "t_a_b"]
    assert toolset.names() == ["t", "t_a", "t_a_b"]
    assert run(toolset["t_a_b"].call({"a": 2})).value == 3
    assert order == ["b", "a"]
    descriptor = toolset["t_a_b"].descriptor()
    assert (descriptor.base, [layer.name for layer in descriptor.stack]) == ("t", ["a", "b"])


def test_shared_prefixes_bind_once() -> None:
    toolset = toolset_with(make_tool())
    added = apply(
        toolset,
        "add",
        elements("retry"),
        elements("retry", "cache"),
        elements("retry", ("timeout", {"seconds": 1})),
    )
    assert added == ["add_retry", "add_retry_cache", "add_retry_timeout"]
    assert toolset.quarantined == ()


def test_same_name_with_another_config_is_refused() -> None:
    toolset = toolset_with(make_tool())
    apply(toolset, "add", elements("retry"), elements(("retry", {"attempts": 5}), "cache"))
    assert toolset.names() == ["add", "add_retry"]
    [item] = toolset.quarantined
    assert item.to_json() == {
        "name": "add_retry_cache",
        "field": "combo[1][0]",
        "rule": "cannot apply combo [retry, cache] to tool 'add': variant name 'add_retry' is "
        "minted twice with different configs (rule: one name, one variant)",
        "owner": "extensions",
    }


@pytest.mark.parametrize("tool", ["my-tool", "2fa", "a.b"])
def test_variant_names_keep_the_raw_tool_name(tool: str) -> None:
    toolset = toolset_with(make_tool(tool))
    assert apply(toolset, tool, elements("cache")) == [f"{tool}_cache"]


def test_dash_and_underscore_names_stay_distinct() -> None:
    toolset = toolset_with(make_tool("a-b"), make_tool("a_b"))
    assert apply(toolset, "a-b", elements("cache")) == ["a-b_cache"]
    assert apply(toolset, "a_b", elements("cache")) == ["a_b_cache"]
    assert toolset.names() == ["a-b", "a-b_cache", "a_b", "a_b_cache"]


def test_a_variant_never_replaces_an_existing_tool() -> None:
    base = make_tool()
    toolset = toolset_with(base, make_tool("add_retry"))
    assert apply(toolset, "add", elements("retry")) == []
    assert toolset["add"] is base
    assert toolset.quarantined[0].rule == (
        "cannot apply combo [retry] to tool 'add': variant name 'add_retry' is already taken "
        "(rule: an extension mints a new name and never replaces a tool)"
    )


def test_variant_name_longer_than_64_is_refused() -> None:
    base = make_tool("x" * 60)
    assert refusal(base, "cache") == (
        f"cannot apply combo [cache] to tool {'x' * 60!r}: variant name {'x' * 60 + '_cache'!r} "
        "must match ^[A-Za-z0-9_.-]{1,64}$"
    )


def test_a_refused_combo_binds_its_valid_prefix_and_others_still_bind() -> None:
    toolset = toolset_with(make_tool())
    added = apply(toolset, "add", elements("retry", "nope", "cache"), elements("cache"))
    assert added == ["add_retry", "add_cache"]
    assert toolset.names() == ["add", "add_cache", "add_retry"]
    [item] = toolset.quarantined
    assert item.to_json() == {
        "name": "add_retry_nope_cache",
        "field": "combo[0][1]",
        "rule": "cannot apply combo [retry, nope, cache] to tool 'add': unknown extension "
        f"'nope' (registered: {REGISTERED}) (its valid prefix binds: add_retry)",
        "owner": "extensions",
    }


def test_the_readme_combo_binds_retry_and_quarantines_timeout_naming_it() -> None:
    """``[["retry", "timeout"]]`` without ``seconds``: ``add_retry`` binds (issue 30 item 20)."""
    toolset = toolset_with(make_tool())
    assert apply(toolset, "add", elements("retry", "timeout")) == ["add_retry"]
    [item] = toolset.quarantined
    assert (item.name, item.field, item.rule) == (
        "add_retry_timeout",
        "combo[0][1]",
        "cannot apply combo [retry, timeout] to tool 'add': invalid config for extension "
        "'timeout': seconds: Field required (its valid prefix binds: add_retry)",
    )


def test_the_first_invalid_layer_is_the_refusal_and_a_shared_prefix_is_named() -> None:
    registry = registry_with(("backend", "proc", passthrough), ("backend", "pool", passthrough))
    toolset = toolset_with(make_tool())
    added = apply(
        toolset,
        "add",
        elements("proc"),
        elements("proc", "retry", "pool", "nope"),
        registry=registry,
    )
    assert added == ["add_proc", "add_proc_retry"]
    [item] = toolset.quarantined
    assert (item.field, item.rule) == (
        "combo[1][2]",
        "cannot apply combo [proc, retry, pool, nope] to tool 'add': two backend extensions "
        "('proc' and 'pool') in one combo (rule: backend is not multiple: at most one per "
        "combo) (its valid prefix binds: add_proc, add_proc_retry)",
    )


def test_build_combo_stays_all_or_nothing() -> None:
    with pytest.raises(ExtensionError) as refused:
        build_combo(make_tool(), elements("retry", "nope"))
    assert refused.value.fields["combo"] == ["retry", "nope"]


def test_unknown_extension() -> None:
    assert refusal(make_tool(), "retry", "nope") == (
        "cannot apply combo [retry, nope] to tool 'add': unknown extension 'nope' "
        f"(registered: {REGISTERED})"
    )


def test_two_backends_in_one_combo() -> None:
    registry = registry_with(("backend", "proc", passthrough), ("backend", "pool", passthrough))
    assert refusal(make_tool(), "proc", "retry", "pool", registry=registry) == (
        "cannot apply combo [proc, retry, pool] to tool 'add': two backend extensions "
        "('proc' and 'pool') in one combo (rule: backend is not multiple: at most one per combo)"
    )


def test_wrappers_and_transformers_may_repeat() -> None:
    base = make_tool()
    built = build_combo(base, elements("retry", "retry", ("args", {}), ("args", {})))
    assert [tool.name for _, tool in built] == [
        "add_retry",
        "add_retry_retry",
        "add_retry_retry_args",
        "add_retry_retry_args_args",
    ]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda s: {**s, "properties": {**s["properties"], "c": {}}}, "/properties/c"),
        (
            lambda s: {**s, "properties": {**s["properties"], "a": {"type": "number"}}},
            "/properties/a/description",
        ),
        (
            lambda s: {
                **s,
                "properties": {**s["properties"], "a": {"type": "number", "description": "first"}},
            },
            "/properties/a/type",
        ),
        (
            lambda s: {
                **s,
                "properties": {**s["properties"], "b": {"type": "integer", "default": 2}},
            },
            "/properties/b/default",
        ),
        (
            lambda s: {
                **s,
                "properties": {
                    **s["properties"],
                    "b": {"type": "integer", "default": 1, "minimum": 0},
                },
            },
            "/properties/b/minimum",
        ),
        (lambda s: {**s, "required": []}, "/required/0"),
        (lambda s: {**s, "description": "new"}, "/description"),
    ],
    ids=["name", "description", "type", "default", "constraint", "required", "top-level"],
)
def test_wrapper_that_changes_the_schema_is_refused(change: Any, where: str) -> None:
    registry = registry_with(("wrapper", "bad", schema_changing(change)))
    assert refusal(make_tool(), "bad", registry=registry) == (
        f"cannot apply combo [bad] to tool 'add': wrapper 'bad' presents an input schema that "
        f"differs from its input at {where} {SCHEMA_RULE}"
    )


def test_reserved_param_already_on_the_input() -> None:
    schema = {"type": "object", "properties": {"timeout_s": {"type": "number"}}}
    assert refusal(make_tool("slow", schema=schema), ("timeout", {"seconds": 1})) == (
        "cannot apply combo [timeout] to tool 'slow': reserved param 'timeout_s' of wrapper "
        "'timeout' is already a parameter of 'slow' (rule: a reserved param must not shadow an "
        "input parameter)"
    )


def test_reserved_param_not_shown_in_the_schema() -> None:
    registry = registry_with(("wrapper", "hush", passthrough), reserved_params=["quiet"])
    assert refusal(make_tool(), "hush", registry=registry) == (
        "cannot apply combo [hush] to tool 'add': wrapper 'hush' does not show its reserved "
        "param 'quiet' in the variant's input schema (rule: reserved params are declared in the "
        "schema)"
    )


@pytest.mark.parametrize(
    "schema",
    [{"type": "object"}, {}, {"type": "object", "properties": {}}],
    ids=["bare-object", "empty", "open-no-properties"],
)
def test_transformer_without_a_concrete_schema(schema: dict[str, Any]) -> None:
    registry = registry_with(("transformer", "loose", schema_changing(lambda s: schema)))
    assert refusal(make_tool(), "loose", registry=registry) == (
        "cannot apply combo [loose] to tool 'add': transformer 'loose' presents no concrete "
        "input schema (rule: a transformer declares its own parameters, never bare "
        "*args/**kwargs)"
    )


def test_transformer_with_no_parameters_is_concrete() -> None:
    closed = {"type": "object", "properties": {}, "additionalProperties": False}
    registry = registry_with(("transformer", "none", schema_changing(lambda s: closed)))
    [(_, variant)] = build_combo(make_tool(), elements("none"), registry=registry)
    assert variant.spec.input_schema == closed


def test_config_to_an_extension_without_a_config_model() -> None:
    registry = registry_with(("wrapper", "plain", passthrough))
    assert refusal(make_tool(), ("plain", {"x": 1, "a": 2}), registry=registry) == (
        "cannot apply combo [plain] to tool 'add': extension 'plain' takes no config "
        "(got keys: a, x)"
    )


@pytest.mark.parametrize(
    ("config", "rule"),
    [
        ({"attempts": 0}, "attempts: Input should be greater than or equal to 1"),
        ({"tries": 3}, "tries: Extra inputs are not permitted"),
        (
            {"attempts": "many"},
            "attempts: Input should be a valid integer, unable to parse string as an integer",
        ),
    ],
)
def test_config_failing_its_model(config: dict[str, Any], rule: str) -> None:
    assert refusal(make_tool(), ("retry", config)) == (
        f"cannot apply combo [retry] to tool 'add': invalid config for extension 'retry': {rule}"
    )


def test_locality_extension_outside_a_relocating_one_is_refused() -> None:
    registry = registry_with(("backend", "proc", passthrough))
    register_extension(
        passthrough, kind="wrapper", name="proxy", requires_body_locality=True, registry=registry
    )
    assert refusal(make_tool(), "proc", "retry", "proxy", registry=registry) == (
        "cannot apply combo [proc, retry, proxy] to tool 'add': extension 'proxy' requires body "
        "locality but is placed after (outside) relocating extension 'proc' (rule: put it before "
        "'proc' in the combo so it runs where the body runs)"
    )
    built = build_combo(make_tool(), elements("proxy", "proc"), registry=registry)
    assert [tool.name for _, tool in built] == ["add_proxy", "add_proxy_proc"]


def test_factory_misbehaviour_is_refused() -> None:
    def misnamed(inner: Tool, *, name: str, config: Any) -> Tool:
        return passthrough(inner, name="other", config=config)

    def not_a_tool(inner: Tool, *, name: str, config: Any) -> Any:
        return "tool"

    def broken(inner: Tool, *, name: str, config: Any) -> Tool:
        raise RuntimeError("no pool")

    registry = registry_with(
        ("wrapper", "misnamed", misnamed),
        ("wrapper", "str", not_a_tool),
        ("wrapper", "broken", broken),
    )
    base = make_tool()
    assert refusal(base, "misnamed", registry=registry).endswith(
        "extension 'misnamed' returned a tool named 'other', not 'add_misnamed' "
        "(rule: a variant is named <tool>_<extension>)"
    )
    assert refusal(base, "str", registry=registry).endswith(
        "extension 'str' returned str, not a Tool"
    )
    assert refusal(base, "broken", registry=registry) == (
        "cannot apply combo [broken] to tool 'add': extension 'broken' failed to build "
        "'add_broken': RuntimeError: no pool"
    )


def test_refusal_carries_structured_fields() -> None:
    with pytest.raises(ExtensionError) as info:
        build_combo(make_tool(), elements("nope"), registry=ExtensionRegistry())
    assert info.value.fields == {
        "tool": "add",
        "combo": ["nope"],
        "rule": f"unknown extension 'nope' (registered: {REGISTERED})",
    }


def test_output_schema_inherited_only_through_shape_preserving_kinds() -> None:
    registry = registry_with(("backend", "proc", passthrough))
    transformer(
        name="same", input_schema=lambda spec, config: spec.input_schema, registry=registry
    )(lambda arguments, config: arguments)
    base = make_tool(output_schema={"type": "integer"})
    built = dict(
        (tool.name, tool)
        for _, tool in build_combo(
            base, elements("retry", "proc", "same", "cache"), registry=registry
        )
    )
    assert built["add_retry"].spec.output_schema == {"type": "integer"}
    assert built["add_retry_proc"].spec.output_schema == {"type": "integer"}
    assert built["add_retry_proc_same"].spec.output_schema is None
    assert built["add_retry_proc_same_cache"].spec.output_schema is None
    projected = build_combo(
        base,
        elements(("project", {"expression": "@", "output_schema": {"type": "number"}}), "retry"),
    )
    assert [tool.spec.output_schema for _, tool in projected] == [{"type": "number"}] * 2


def test_descriptions_kept_unless_a_layer_sets_a_new_one() -> None:
    def blank(inner: Tool, *, name: str, config: Any) -> Tool:
        return Tool(
            inner.spec.model_copy(update={"name": name, "description": " "}), inner.run_validated
        )

    registry = registry_with(("wrapper", "blank", blank))
    base = make_tool()
    [(_, kept)] = build_combo(base, elements("blank"), registry=registry)
    assert kept.spec.description == "Add two integers."
    built = build_combo(base, elements(("args", {"description": "Sum."}), "retry"))
    assert [tool.spec.description for _, tool in built] == ["Sum.", "Sum."]


def test_descriptor_stack_and_config_fingerprint() -> None:
    base = make_tool()
    [(_, one)] = build_combo(base, elements(("timeout", {"seconds": 1})))
    [(_, two)] = build_combo(base, elements(("timeout", {"seconds": 2})))
    [layer] = one.descriptor().stack
    assert layer.to_json() == {
        "schema_version": 1,
        "name": "timeout",
        "kind": "wrapper",
        "version": "1",
        "config_digest": digest_json({"seconds": 1.0}),
    }
    assert one.descriptor().fingerprint != two.descriptor().fingerprint
    assert one.descriptor().fingerprint != base.descriptor().fingerprint
    [(_, again)] = build_combo(base, elements(("timeout", {"seconds": 1})))
    assert again.descriptor().fingerprint == one.descriptor().fingerprint


def test_outermost_variant_validates_once() -> None:
    checks: list[str] = []

    class Counting(Tool):
        __slots__ = ()

        def check_arguments(self, arguments: Any) -> ToolResult | None:
            checks.append(self.name)
            return super().check_arguments(arguments)

    base = Counting(make_tool().spec, make_tool().run_validated)
    *_, (_, outer) = build_combo(base, elements("retry", "cache", ("timeout", {"seconds": 5})))
    assert run(outer.call({"a": 1, "timeout_s": 1})).value == 2
    assert checks == []
    bad = run(outer.call({"a": "1"}))
    assert bad.failure is not None and bad.failure.kind == "invalid_arguments"


def test_call_next_revalidates_when_the_inner_schema_is_not_flat() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}
    inner = make_tool(schema=schema)
    call_next = call_next_for(inner, {"x": {}})
    result = run(call_next({"x": 1}))
    assert result.failure is not None and result.failure.kind == "invalid_arguments"


def test_kind_is_read_from_properties_for_a_backend_variant() -> None:
    registry = registry_with(("backend", "proc", passthrough))
    [(_, variant)] = build_combo(make_tool(), elements("proc"), registry=registry)
    assert variant.descriptor().stack[0].kind == ExtensionKind.BACKEND == "backend"


def test_a_later_combo_cannot_mint_a_refused_name_with_another_config() -> None:
    registry = registry_with(("wrapper", "p", passthrough))
    toolset = toolset_with(make_tool())
    first = elements("retry", ("retry", {"attempts": 0}))
    second = elements("retry", ("retry", {"attempts": 2}), "p")
    assert apply(toolset, "add", first, second, registry=registry) == ["add_retry"]
    rules = {item.name: (item.field, item.rule) for item in toolset.quarantined}
    assert rules["add_retry_retry_p"] == (
        "combo[1][1]",
        "cannot apply combo [retry, retry, p] to tool 'add': variant name 'add_retry_retry' is "
        "minted twice with different configs (rule: one name, one variant) (its valid prefix "
        "binds: add_retry)",
    )
