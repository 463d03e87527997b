"""Issue 35 point 1: a policy file is refused at load with Cedar's message, its file and line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import cedarpy
import pytest

from toolproof import ConfigError, load_toolset
from toolproof.tools.policy import PolicyError, PolicySet
from toolproof.tools.policy_source import parse_problem, request_schema, statements

HERE = Path(__file__).resolve().parent
SYNTAX = "(rule: Cedar policy syntax, https://docs.cedarpolicy.com/policies/syntax-policy.html)"
READS = (
    "(rule: a policy reads only what a request has: resource.read_only, resource.destructive, "
    "resource.source, resource.server, context.arguments.<an argument of a tool>, "
    'context.calls, context.total_calls, context.elapsed_seconds; action Action::"call_tool")'
)
GOOD = """@id("small")
permit(principal == Agent::"triage", action == Action::"call_tool", resource == Tool::"transfer")
when { context.arguments has amount && context.arguments.amount < 500 && context.calls < 3 };
"""


def refusal(tmp_path: Path, text: str) -> str:
    """The message of the ConfigError that loading a config with ``text`` as a policy raises."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "a.cedar").write_text(GOOD, encoding="utf-8")
    (tmp_path / "policies" / "b.cedar").write_text(text, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{HERE}"\n\n'
        '[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )

    async def main() -> None:
        async with load_toolset(config):
            pass

    with pytest.raises(ConfigError) as caught:
        asyncio.run(main())
    return str(caught.value).removeprefix(f"{config}: policy.files: ")


def test_a_syntax_error_names_the_line_of_the_token_cedar_refuses(tmp_path: Path) -> None:
    text = (
        '@id("ok; really") // a comment; with a semicolon\n'
        "permit(principal, action, resource);\n"
        "\n"
        "forbid(principal,\n"
        "  action,\n"
        "  resource) when { 1 + };\n"
    )
    assert refusal(tmp_path, text) == (
        f"policy file policies/b.cedar:6: Cedar cannot parse it: unexpected token `}}` {SYNTAX}"
    )


def test_an_error_cedar_recovers_from_inside_braces_is_placed_at_its_brace() -> None:
    text = "permit(principal, action, resource)\n when { true }\n unless { 1 + };\n"
    assert parse_problem(cedarpy, text) == (3, "unexpected token `}`")
    text = "permit(principal, action, resource)\n when { 1 + }\n unless { true };\n"
    assert parse_problem(cedarpy, text) == (2, "unexpected token `}`")


def test_a_misspelt_condition_names_its_line_and_an_unended_policy_its_first(
    tmp_path: Path,
) -> None:
    assert parse_problem(cedarpy, "permit(principal, action, resource)\n  wehn { true };\n") == (
        2,
        "invalid policy condition: wehn",
    )
    text = "permit(principal, action, resource);\n\npermit(principal,\n action, resource)\n"
    assert refusal(tmp_path, text) == (
        f"policy file policies/b.cedar:3: Cedar cannot parse it: unexpected end of input {SYNTAX}"
    )


def test_statements_split_at_semicolons_outside_strings_and_comments() -> None:
    text = '// a; b\n@id("x;y")\npermit(principal, action, resource) when { "a\\";" == "" };\n\n'
    parts = statements(text)
    assert [(part.line, part.text[:8], part.text[-1]) for part in parts] == [(2, '@id("x;y', ";")]


def test_an_unknown_resource_attribute_is_refused_with_cedars_validator_message(
    tmp_path: Path,
) -> None:
    text = (
        "permit(principal, action, resource)\n"
        "when {\n"
        "  resource.read_only &&\n"
        '  resource.owner == "ops"\n'
        "};\n"
    )
    assert refusal(tmp_path, text) == (
        "policy file policies/b.cedar:4: Cedar's validator: for policy `policy0`, attribute "
        f"`owner` on entity type `Tool` not found {READS}"
    )


def test_an_argument_no_tool_has_and_an_unknown_counter_are_refused(tmp_path: Path) -> None:
    text = (
        'permit(principal, action, resource == Tool::"transfer");\n'
        "forbid(principal, action, resource)\n"
        "when { context.arguments.amonut > 5 ||\n"
        '  context["call_count"] > 3 };\n'
    )
    assert refusal(tmp_path, text) == (
        "policy file policies/b.cedar:3: Cedar's validator: for policy `policy1`, attribute "
        '`arguments.amonut` in context for Action::"call_tool" not found (and 1 more) '
        f"{READS}"
    )


def test_cedars_other_complaints_about_the_guessed_schema_do_not_refuse() -> None:
    # an optional argument read without `has`, a type Cedar cannot prove, an undeclared
    # principal type: the request may well have them, so they load
    text = (
        'permit(principal == Org::Bot::"a", action, resource) when {\n'
        "  context.arguments.amount < 5 && context.arguments.to == 3 };\n"
    )
    policy = PolicySet((("p.cedar", text),), "deny")
    schema = {
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
    }
    policy.check_attributes([schema])  # no error


def test_the_request_schema_types_the_tools_arguments_and_merges_records() -> None:
    schema = request_schema(
        [
            {"properties": {"n": {"type": "integer"}, "o": {"properties": {"a": {}}}}},
            {
                "properties": {
                    "n": {"type": "string"},
                    "o": {
                        "type": "object",
                        "properties": {"b": {"type": "array", "items": {"type": "boolean"}}},
                    },
                }
            },
        ]
    )
    context = schema[""]["actions"]["call_tool"]["appliesTo"]["context"]["attributes"]
    assert context["arguments"] == {
        "type": "Record",
        "attributes": {
            "n": {"type": "Long", "required": False},
            "o": {
                "type": "Record",
                "required": False,
                "attributes": {
                    "a": {"type": "String", "required": False},
                    "b": {"type": "Set", "element": {"type": "Boolean"}, "required": False},
                },
            },
        },
    }


def test_a_stored_policy_set_that_does_not_parse_names_its_line() -> None:
    with pytest.raises(PolicyError) as caught:
        PolicySet.from_json(
            {"default": "deny", "files": [{"name": "x.cedar", "text": "\n\nforbid(principal"}]}
        )
    assert str(caught.value) == (
        f"policy file x.cedar:3: Cedar cannot parse it: unexpected end of input {SYNTAX}"
    )


def test_an_action_other_than_call_tool_is_refused(tmp_path: Path) -> None:
    text = (
        "permit(principal, action,\n  resource);\n"
        'forbid(principal, action == Action::"calltool", resource);\n'
    )
    assert refusal(tmp_path, text) == (
        "policy file policies/b.cedar:3: Cedar's validator: for policy `policy1`, unrecognized "
        f'action `Action::"calltool"` {READS}'
    )


def test_a_policy_about_a_tool_the_toolset_lacks_is_refused(tmp_path: Path) -> None:
    text = 'permit(principal, action,\n  resource == Tool::"trasnfer");\n'
    assert refusal(tmp_path, text) == (
        'policy file policies/b.cedar:2: resource == Tool::"trasnfer" names no tool of this '
        "Toolset (tools: purge, transfer; rule: a policy about one tool names a bound or "
        "quarantined tool, so a misspelt name is noticed)"
    )


def test_an_approval_annotation_other_than_required_is_refused(tmp_path: Path) -> None:
    text = '@id("big")\n@approval("requried")\npermit(principal, action, resource);\n'
    assert refusal(tmp_path, text) == (
        'policy file policies/b.cedar:2: @approval("requried") is not an approval toolproof '
        'knows (rule: @approval("required") is the only one: the permit allows a call only '
        "through an approve layer that asks a person)"
    )
