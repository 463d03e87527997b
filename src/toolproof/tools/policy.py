"""Cedar policies over tool calls: the ``[policy]`` table of ``toolproof.toml`` (docs/policy.md).

A :class:`PolicySet` is the text of the policy files (Cedar, https://docs.cedarpolicy.com/,
evaluated by the ``cedarpy`` bindings of the Cedar engine, the ``policy`` extra
of a clone) and the ``default`` for a call no policy decides. Each call is one
Cedar request (:func:`cedar_request`):

* principal: the session's or served client's identity, ``Type::id``
  (``Agent::triage``; default :data:`DEFAULT_PRINCIPAL`);
* action: ``Action::"call_tool"``;
* resource: ``Tool::"<name>"`` with attributes ``read_only``, ``destructive`` (the
  tool's MCP annotations, an unstated hint is ``false``) and ``source``;
* context: ``arguments`` (the validated arguments), ``calls`` (calls of this tool
  earlier in the session), ``total_calls`` (all earlier calls) and
  ``elapsed_seconds`` (whole seconds since the session began).

A call is allowed when Cedar allows it, or when no policy is determining, Cedar
reports no error and ``default`` is ``"allow"``. The set's :attr:`PolicySet.digest`
is the ``sha256:`` of the canonical JSON (RFC 8785) of :meth:`PolicySet.to_json`,
which the Toolset descriptor records whole (``policy``), so the run holds the
policies and the ``policy`` check re-evaluates each recorded decision offline.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolproof.contract.tools import ToolResult
from toolproof.errors import InputError
from toolproof.identity import digest_json
from toolproof.tools.observe import note_policy
from toolproof.tools.policy_source import (
    attribute_problems,
    for_tool,
    parse_problem,
    request_schema,
    scope_problems,
    tool_attributes,
)
from toolproof.version import install_hint

__all__ = [
    "ACTION",
    "DEFAULT_PRINCIPAL",
    "PolicyDecision",
    "PolicyError",
    "PolicyGate",
    "PolicySet",
    "asks_always",
    "cedar_request",
    "gated_call",
    "principal_entity",
    "tool_attributes",
]

ACTION = 'Action::"call_tool"'
"""The Cedar action of every tool call."""

DEFAULT_PRINCIPAL = "Agent::default"
"""The principal of a session that names none."""


PolicyError = InputError
"""What a refused policy file, policy record or principal raises: an :class:`InputError`
whose message names the file (or the principal) and Cedar's words."""


def _cedar() -> Any:
    """The ``cedarpy`` module, or a clear error naming the extra that brings it."""
    try:
        import cedarpy
    except ImportError as exc:  # pragma: no cover - the extra is part of [dev]
        raise PolicyError(
            f"[policy] needs the Cedar engine (cedarpy): {install_hint('policy')}"
        ) from exc
    return cedarpy


def principal_entity(principal: str) -> dict[str, str]:
    """``Type::id`` as a Cedar entity reference ``{"type", "id"}``.

    The type is everything before the last ``::`` (a namespaced ``Org::Agent::x``
    keeps ``Org::Agent``); the id is the rest, taken literally.

    Raises:
        PolicyError: no ``::``, or an empty type or id.

    """
    kind, sep, ident = principal.rpartition("::")
    if not sep or not kind or not ident:
        raise PolicyError(
            f"principal {principal!r}: expected 'Type::id' (e.g. 'Agent::triage'; rule: a Cedar "
            "entity type, '::', then the id)"
        )
    return {"type": kind, "id": ident}


def cedar_request(
    principal: str,
    tool: str,
    attributes: dict[str, Any],
    arguments: dict[str, Any],
    counters: dict[str, int],
) -> dict[str, Any]:
    """The recorded form of one call's Cedar request (plain JSON).

    Args:
        principal: ``Type::id``.
        tool: the called tool's name (the resource ``Tool::"<tool>"``).
        attributes: the resource's attributes (``read_only``, ``destructive``, ``source``).
        arguments: the validated arguments (JSON object).
        counters: ``calls``, ``total_calls``, ``elapsed_seconds`` (whole numbers).

    Returns:
        ``{"principal", "tool", "attributes", "context"}``; :meth:`PolicySet.decide` takes it.

    """
    return {
        "principal": principal,
        "tool": tool,
        "attributes": dict(attributes),
        "context": {"arguments": arguments, **counters},
    }


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What the policy set answered for one request.

    Attributes:
        decision: ``"allow"`` or ``"deny"``.
        determining: the ids of the determining policies (``@id("...")`` when a policy
            has one, else Cedar's ``policy<N>`` in the set's order), sorted.
        errors: Cedar's evaluation errors (a policy that errored is skipped by Cedar).
        defaulted: no policy was determining and ``default`` decided.
        approval: an allowing decision whose determining permits include one annotated
            ``@approval("required")``: the call runs only through an ``approve`` layer
            that asks a person.

    """

    decision: Literal["allow", "deny"]
    determining: tuple[str, ...]
    errors: tuple[str, ...] = ()
    defaulted: bool = False
    approval: bool = False


@dataclass(frozen=True)
class PolicySet:
    """The loaded ``[policy]`` table: the files' text and the default.

    Attributes:
        files: ``(name, text)`` per policy file, in load order (names relative to the
            ``toolproof.toml``).
        default: ``"deny"`` or ``"allow"``: the answer when no policy is determining.
        tools: each tool's resource attributes (:func:`tool_attributes`) by name, as
            bound when the set was loaded; recorded with the set (not in its digest),
            so the ``policy`` check binds each request's attributes to its tool's.
            Empty for a set built without a Toolset.

    """

    files: tuple[tuple[str, str], ...]
    default: Literal["deny", "allow"] = "deny"
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    _parsed: Any = field(default=None, repr=False, compare=False)
    _digest: str = field(default="", repr=False, compare=False)
    _entities: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    _approval: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    _json: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _by_tool: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Parse every file (one Cedar parse each, so an error names its file)."""
        if self.default not in ("deny", "allow"):
            raise PolicyError(
                f"policy.default: {self.default!r} is neither 'deny' nor 'allow' (rule: what a "
                "call no policy decides gets)"
            )
        cedar = _cedar()
        for name, text in self.files:
            try:
                cedar.PolicySet.from_str(text)
            except ValueError as exc:
                line, message = parse_problem(cedar, text) or (1, str(exc))
                raise PolicyError(
                    f"policy file {name}:{line}: Cedar cannot parse it: {message} (rule: Cedar "
                    "policy syntax, https://docs.cedarpolicy.com/policies/syntax-policy.html)"
                ) from exc
            scoped = scope_problems(cedar, text, None)  # an @approval other than "required"
            if scoped:
                raise PolicyError(f"policy file {name}:{scoped[0][0]}: {scoped[0][1]}")
        object.__setattr__(self, "_parsed", cedar.PolicySet.from_str(self.text))
        object.__setattr__(self, "_digest", digest_json(self._body()))
        object.__setattr__(self, "_json", json.loads(cedar.policies_to_json_str(self.text)))
        static = self._json.get("staticPolicies", {})
        required = frozenset(
            ident
            for ident, policy in static.items()
            if (policy.get("annotations") or {}).get("approval") == "required"
        )
        object.__setattr__(self, "_approval", required)

    def check_attributes(
        self, input_schemas: Iterable[Mapping[str, Any]], tools: Collection[str] | None = None
    ) -> None:
        """Refuse a policy that names an attribute, action or tool no request of these has.

        Cedar's validator (``cedarpy.validate_policies``) checks each file against the
        schema of toolproof's requests (:func:`~toolproof.tools.policy_source.request_schema`:
        ``Tool`` with ``read_only``, ``destructive``, ``source``; context ``arguments``
        with the tools' arguments, ``calls``, ``total_calls``, ``elapsed_seconds``;
        ``Agent`` principals with none). Only its "attribute ... not found" complaints
        refuse; its other ones are about the schema's guesses (docs/policy.md).

        A policy whose resource scope is ``==`` (or ``in``) a ``Tool::"<name>"`` that is
        not among ``tools`` is refused too
        (:func:`~toolproof.tools.policy_source.scope_problems`).

        Args:
            input_schemas: the input JSON Schema of every tool the set will decide.
            tools: every tool name the Toolset knows (``None``: not checked).

        Raises:
            PolicyError: the first such complaint: the file, the line, the message.

        """
        cedar = _cedar()
        schema = request_schema(input_schemas)
        for name, text in self.files:
            problems = attribute_problems(cedar, text, schema)
            if problems:
                line, message = problems[0]
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise PolicyError(
                    f"policy file {name}:{line}: Cedar's validator: {message}{more} (rule: a "
                    "policy reads only what a request has: resource.read_only, "
                    "resource.destructive, resource.source, resource.server, "
                    "context.arguments.<an argument of a tool>, context.calls, "
                    'context.total_calls, context.elapsed_seconds; action Action::"call_tool")'
                )
            scoped = scope_problems(cedar, text, tools)
            if scoped:
                line, message = scoped[0]
                raise PolicyError(f"policy file {name}:{line}: {message}")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PolicySet:
        """The set :meth:`to_json` wrote (the Toolset descriptor's ``policy``).

        Raises:
            PolicyError: a malformed record, or a file Cedar cannot parse.

        """
        try:
            files = tuple((str(item["name"]), str(item["text"])) for item in data["files"])
            tools = data.get("tools") or {}
            return cls(files, data["default"], {str(k): dict(v) for k, v in tools.items()})
        except (KeyError, TypeError) as exc:
            raise PolicyError(f"policy record: malformed ({exc!r})") from exc

    @property
    def text(self) -> str:
        """Every file's text, joined in order (what Cedar evaluates as one set)."""
        return "\n".join(text for _, text in self.files)

    def to_json(self) -> dict[str, Any]:
        """``{"default", "files": [{"name", "text"}], "digest"}``, and ``tools`` when bound."""
        tools = {"tools": {k: dict(v) for k, v in self.tools.items()}} if self.tools else {}
        return {**self._body(), "digest": self._digest, **tools}

    def _body(self) -> dict[str, Any]:
        files = [{"name": name, "text": text} for name, text in self.files]
        return {"default": self.default, "files": files}

    @property
    def digest(self) -> str:
        """``sha256:`` of the canonical JSON of ``{"default", "files"}`` (computed once)."""
        return self._digest

    def _for_tool(self, tool: Any) -> Any:
        """The parsed policies that can apply to ``tool`` (built once per tool name)."""
        parsed = self._by_tool.get(tool)
        if parsed is None:
            subset = for_tool(self._json, str(tool))
            cedar = _cedar()
            parsed = (
                self._parsed
                if subset is None
                else cedar.PolicySet.from_json_str(json.dumps(subset))
            )
            self._by_tool[tool] = parsed
        return parsed

    def decide(self, request: dict[str, Any]) -> PolicyDecision:
        """Evaluate one recorded request (:func:`cedar_request`) with Cedar.

        Only the policies whose resource scope admits the request's tool are given to
        Cedar (:func:`~toolproof.tools.policy_source.for_tool`: the same answer as the
        whole set's); Cedar's errors are sorted.

        Raises:
            PolicyError: the request's principal is not ``Type::id``.

        """
        cedar = _cedar()
        entity = {"type": "Tool", "id": request["tool"]}
        key = (request["tool"], tuple(sorted(request["attributes"].items())))
        entities = self._entities.get(key)
        if entities is None:  # parsed once per tool and attributes, as Cedar allows
            plain = [{"uid": entity, "attrs": request["attributes"], "parents": []}]
            entities = cedar.Entities.from_json_str(json.dumps(plain))
            self._entities[key] = entities
        answer = cedar.is_authorized(
            {
                "principal": principal_entity(request["principal"]),
                "action": ACTION,
                "resource": entity,
                "context": request["context"],
            },
            self._for_tool(request["tool"]),
            entities,
        )
        diagnostics = answer.diagnostics
        names = diagnostics.id_annotations_by_reason
        determining = tuple(sorted(names.get(r, r) for r in diagnostics.reasons))
        errors = tuple(sorted(str(error) for error in diagnostics.errors))
        if answer.allowed:
            approval = any(reason in self._approval for reason in diagnostics.reasons)
            return PolicyDecision("allow", determining, errors, approval=approval)
        if not determining and not errors and self.default == "allow":
            return PolicyDecision("allow", (), errors, defaulted=True)
        return PolicyDecision("deny", determining, errors, defaulted=not (determining or errors))


class PolicyGate:
    """One session's or server's evaluation of its calls: principals, counters, the clock.

    The counters are kept per principal: ``calls`` and ``total_calls`` count the
    calls of the principal deciding, so each served client is its own session.

    Args:
        policy: the Toolset's policy set.
        principal: ``Type::id`` (:func:`principal_entity` checks it now): who a call
            that names no principal of its own acts for.

    Raises:
        PolicyError: a principal that is not ``Type::id``.

    """

    def __init__(self, policy: PolicySet, principal: str) -> None:
        principal_entity(principal)
        self.policy = policy
        self.principal = principal
        self._calls: dict[tuple[str, str], int] = {}
        self._total: dict[str, int] = {}
        self._start = time.monotonic()

    def denied(
        self, tool: Any, arguments: dict[str, Any], principal: str | None = None
    ) -> ToolResult | None:
        """Decide one call and report it (:func:`~toolproof.tools.observe.note_policy`).

        Args:
            tool: the called :class:`~toolproof.tools.tool.Tool`.
            arguments: its validated arguments.
            principal: who the call acts for (a served client), else the gate's.

        Returns:
            ``None`` when allowed; else the ``denied_by_policy`` failure (``where``
            ``"runtime"``, ``detail``: ``determining``, ``digest``, ``principal``,
            ``errors``) to return instead of running the body.

        """
        who = principal or self.principal
        decision, event = self.decide(tool, arguments, who)
        note_policy(event)
        if decision.decision == "allow" and (not decision.approval or asks_always(tool)):
            return None
        detail: dict[str, Any] = {
            "determining": list(decision.determining),
            "digest": self.policy.digest,
            "principal": who,
            "errors": list(decision.errors),
        }
        if decision.decision == "allow":
            detail["approval"] = "required"
            why = (
                f"{', '.join(decision.determining)} permits it only with a person's approval "
                f'(@approval("required")), and no approve layer of {tool.name!r} asks on every '
                "call: call its approve variant (without [[approvals.rules]])"
            )
        else:
            named = ", ".join(decision.determining) or f"none (default {self.policy.default!r})"
            errors = f"; Cedar errors: {'; '.join(decision.errors)}" if decision.errors else ""
            why = f"determining {named}{errors}"
        message = f"call to {tool.name!r} by {who} denied by policy: {why}"
        return ToolResult.fail("denied_by_policy", message, where="runtime", detail=detail)

    def decide(
        self, tool: Any, arguments: dict[str, Any], principal: str | None = None
    ) -> tuple[PolicyDecision, dict[str, Any]]:
        """Decide one call of ``tool`` (a :class:`~toolproof.tools.tool.Tool`); count it.

        Args:
            tool: the called tool.
            arguments: its validated arguments.
            principal: ``Type::id`` the call acts for (default: the gate's).

        Returns:
            The decision and the ``policy_decided`` event fields (``digest``,
            ``decision``, ``determining``, ``errors``, ``request``).

        Raises:
            PolicyError: ``principal`` is not ``Type::id``.

        """
        who = principal or self.principal
        attributes = tool_attributes(tool)
        counters = {
            "calls": self._calls.get((who, tool.name), 0),
            "total_calls": self._total.get(who, 0),
            "elapsed_seconds": int(time.monotonic() - self._start),
        }
        self._calls[who, tool.name] = counters["calls"] + 1
        self._total[who] = counters["total_calls"] + 1
        request = cedar_request(who, tool.name, attributes, arguments, counters)
        decision = self.policy.decide(request)
        event = {
            "type": "policy_decided",
            "digest": self.policy.digest,
            "decision": decision.decision,
            "determining": list(decision.determining),
            "errors": list(decision.errors),
            "approval_required": decision.approval,
            "request": request,
        }
        return decision, event


def asks_always(tool: Any) -> bool:
    """Whether a layer of ``tool`` is ``approve`` with no ``rules`` (it asks on every call)."""
    current = tool
    while current is not None:
        stack = current.stack
        if stack and stack[-1].name == "approve":
            config = current.config if isinstance(current.config, dict) else {}
            return not config.get("rules")
        current = current.inner
    return False


async def gated_call(
    gate: PolicyGate | None, tool: Any, arguments: Any, principal: str | None = None
) -> ToolResult:
    """``tool.call(arguments)`` with ``gate`` deciding first (``None``: no policy).

    ``principal`` is who the call acts for (a served client's ``Agent::<name>``);
    ``None``: the gate's own.

    The decision comes after the arguments validate (invalid ones fail
    ``invalid_arguments`` undecided) and before every layer of the tool (``approve``
    included) and its body; a denied call returns the ``denied_by_policy`` failure of
    :meth:`PolicyGate.denied` and nothing of the tool runs.
    """
    if gate is not None and tool.check_arguments(arguments) is None:
        denied = gate.denied(tool, copy.deepcopy(arguments), principal)
        if denied is not None:
            return denied
    result: ToolResult = await tool.call(arguments)
    return result
