"""The evaluation of an ``[[approvals.rules]]`` entry's argument predicates, in one place.

The ``approve`` wrapper (:mod:`toolproof.extensions.approvals.policy`) compiles its
rules into :class:`CompiledRule` and evaluates them on every call; the offline
``approvals`` check (:mod:`toolproof.verify.approvals`) rebuilds the same
:class:`CompiledRule` from the rule a trace records (:func:`rule_from_record`) and
evaluates it on the call's recorded arguments. JSON Pointers are RFC 6901; equality
is JSON equality (:func:`json_equal`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolproof.contract.schema_paths import pointer_defaults

__all__ = [
    "CompiledRule",
    "json_equal",
    "policy_rules",
    "resolve_pointer",
    "rule_defaults",
    "rule_from_record",
]

_MISSING: Any = object()


def _is_index(part: str) -> bool:
    """Whether ``part`` is an RFC 6901 array index: ``0`` or ASCII digits without a leading 0.

    (``str.isdigit`` also holds for ``'²'``, which ``int`` refuses.)
    """
    return part.isascii() and part.isdigit() and (part == "0" or part[0] != "0")


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at JSON Pointer ``pointer`` (RFC 6901) in ``document``, or a private sentinel.

    Returns:
        The value, or an object that equals nothing when the pointer does not resolve.

    """
    return _walk(document, _steps(pointer), {})


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, ``1`` equals ``1.0``, objects compare by keys."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class CompiledRule:
    """A rule whose ``when`` matched the tool: only its argument predicates are left.

    Attributes:
        index: its position in ``[[approvals.rules]]``.
        arguments: ``(pointer, value)`` predicates, all must hold.
        record: what ``approval_requested`` / ``approval_skipped`` record as the rule
            (``{"index", "when", "arguments"}``, and ``"defaults"`` when it has some).
        defaults: pointer prefix (RFC 6901) -> the value the input schema gives it when
            the arguments omit it (:func:`rule_defaults`): the predicates see the
            arguments the body will run with, nested defaults included (else
            ``options: {}`` whose ``force`` defaults to ``true`` would slip past
            ``{"/options/force" = true}``).

    """

    index: int
    arguments: tuple[tuple[str, Any], ...]
    record: Mapping[str, Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    _parts: tuple[tuple[tuple[tuple[str, str], ...], Any], ...] = ()

    def __post_init__(self) -> None:
        parts = []
        for pointer, expected in self.arguments:
            parts.append((_steps(pointer), expected))
        object.__setattr__(self, "_parts", tuple(parts))

    def matches(self, arguments: dict[str, Any]) -> bool:
        """Whether every argument predicate holds for ``arguments`` (a JSON object).

        An object member the arguments omit is read as its entry in ``defaults`` (the
        schema's default at that pointer prefix); without one the predicate fails.
        """
        for steps, expected in self._parts:
            node = _walk(arguments, steps, self.defaults)
            if node is not expected and not json_equal(node, expected):
                return False
        return True


def _steps(pointer: str) -> tuple[tuple[str, str], ...]:
    """``(reference token, its pointer prefix)`` per level of an RFC 6901 pointer."""
    raw = pointer.split("/")[1:]
    return tuple((_unescape(part), "/" + "/".join(raw[: i + 1])) for i, part in enumerate(raw))


def _walk(node: Any, steps: Sequence[tuple[str, str]], defaults: Mapping[str, Any]) -> Any:
    """The value at ``steps`` (:func:`_steps`) below ``node``; an omitted member reads ``defaults``.

    ``defaults`` maps a pointer prefix to the value an omitted member at it takes.
    Returns the private sentinel (equal to nothing) when the pointer does not resolve.
    """
    for part, prefix in steps:
        if type(node) is dict:
            node = node.get(part, _MISSING)
            if node is _MISSING:
                node = defaults.get(prefix, _MISSING)
                if node is _MISSING:
                    return _MISSING
        elif type(node) is list and _is_index(part) and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def rule_from_record(record: Mapping[str, Any]) -> CompiledRule:
    """The :class:`CompiledRule` of a recorded rule (the ``record`` a trace holds).

    Args:
        record: ``{"index": int, "when": {...}, "arguments": {pointer: value}}``.

    Returns:
        The rule, evaluating exactly as the wrapper's did.

    Raises:
        ValueError: ``record`` has no integer ``index``, its ``arguments`` is not an
            object, or a key of it is not a JSON Pointer (RFC 6901: starts with ``/``).

    """
    index = record.get("index")
    if type(index) is not int:
        raise ValueError(f"a recorded rule needs an integer 'index', not {index!r}")
    arguments = record.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValueError(f"rule {index}: 'arguments' must be an object of JSON Pointers")
    for pointer in arguments:
        if not isinstance(pointer, str) or not pointer.startswith("/"):
            raise ValueError(
                f"rule {index}: {pointer!r} is not a JSON Pointer (RFC 6901: starts with '/')"
            )
    defaults = record.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ValueError(f"rule {index}: 'defaults' must be an object of pointer defaults")
    # a run recorded before nested defaults names top-level properties, not pointers
    by_pointer = {
        key if key.startswith("/") else "/" + key.replace("~", "~0").replace("/", "~1"): value
        for key, value in defaults.items()
    }
    return CompiledRule(index, tuple(arguments.items()), dict(record), by_pointer)


def policy_rules(policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rule records of a recorded ``approve`` policy, in order.

    Args:
        policy: the validated ``approve`` config a trace records
            (``{"store", "timeout_seconds", "mode", "rules": [{"when", "arguments"}...]}``).

    Returns:
        ``[{"index": i, "when": {...}, "arguments": {...}}, ...]``: each rule as
        ``approval_requested`` / ``approval_skipped`` record it (``[]``: no rules, every
        call of the variant is gated).

    Raises:
        ValueError: ``rules`` is not a list of objects.

    """
    rules = policy.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(rule, dict) for rule in rules):
        raise ValueError("a recorded policy's 'rules' must be a list of objects")
    return [
        {"index": index, "when": rule.get("when", {}), "arguments": rule.get("arguments", {})}
        for index, rule in enumerate(rules)
    ]


def rule_defaults(predicates: Mapping[str, Any], input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The values the predicates' pointer prefixes take when the arguments omit them.

    Args:
        predicates: the rule's ``{JSON Pointer (RFC 6901): value}``.
        input_schema: the tool's input schema (a JSON Schema object).

    Returns:
        ``{pointer prefix: value}`` over every predicate's pointer
        (:func:`~toolproof.contract.schema_paths.pointer_defaults`): the ``default``
        the schema states there, at any depth (through local ``$ref`` and
        ``allOf``/``anyOf``/``oneOf``), or ``{}`` for an omitted object whose schema
        declares properties but no default; only those from which the predicate
        holds (a default it does not hold for changes nothing). Recorded as the
        rule's ``defaults``.

    """
    out: dict[str, Any] = {}
    for pointer, expected in predicates.items():
        found = pointer_defaults(pointer, input_schema)
        steps = _steps(pointer)
        for depth, (_, prefix) in enumerate(steps):
            if prefix not in found:
                continue
            below = _walk(found[prefix], steps[depth + 1 :], found)
            if below is not _MISSING and json_equal(below, expected):
                out[prefix] = found[prefix]
    return out
