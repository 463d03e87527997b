"""How many subschemas a validator may apply to one JSON value of the arguments.

:mod:`toolproof.schema.expansion` bounds what a schema *compiles* to; this module bounds
what validating one call *does*. A validator applies subschemas to a value through
in-place applicators (``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
``dependentSchemas``, ``$ref``, ``$dynamicRef``, ``$recursiveRef``: same value) and
through child applicators (``properties``, ``items``, ``additionalProperties`` ...: a
member or element of the value). A recursive schema can reach the same definition
along several paths at once, so the applications per value grow with the depth of the
arguments — ``{"properties": {"x": {"anyOf": [{"$ref": "#"}, ...10 times]}}}`` applies
10**d subschemas at depth d, and collecting the errors of an invalid call then takes
hours. A cycle of in-place references never reaches a child value at all.

:func:`applications_per_value` explores the sets of subschemas that can apply together
at one location of an instance: a state is the multiset of subschemas entered at a
location, its successors are the states a child under each possible key enters
(a literal property name or array index, or any other key, which only the wildcard
applicators reach). The largest sum over reachable states, up to the arguments' depth
limit, is the bound; it is exact for the counting a validator without short-circuits
does, and an over-estimate otherwise (``patternProperties`` and
``additionalProperties`` are taken to apply to every member). The exploration is itself
bounded (:data:`MAX_STATES`); a schema whose structure needs more is refused as too
complex to bound, never validated unbounded.
"""

from __future__ import annotations

from typing import Any

from toolproof.errors import ToolBindError
from toolproof.schema.refs import DEFAULT_BASE_URI, RefWalker, field_path, flatten

__all__ = ["MAX_NODES", "MAX_STATES", "applications_per_value"]

MAX_STATES = 20_000
"""How many distinct sets of co-applied subschemas the exploration may visit."""

_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_OBJECT_WILD = ("additionalProperties", "unevaluatedProperties", "propertyNames")
_ARRAY_WILD = ("additionalItems", "contains", "unevaluatedItems")
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")

Edge = tuple[int, Any]
"""``(target node, label)``: label ``None`` in place, ``("p", name)``, ``("i", index)``,
``"p*"`` (any member) or ``"i*"`` (any element)."""


Scope = tuple[tuple[str, int], ...]
"""Dynamic anchors in scope: ``(name, id(anchor subschema))``, the outermost of each name."""

_RECURSIVE = "\x00recursive"
"""The name ``$recursiveAnchor: true`` resources are tracked under (draft 2019-09)."""

MAX_NODES = 200_000
"""Subschemas the applicator graph may hold, each counted once per dynamic scope it is
reached in."""


class _Graph:
    """The applicator graph of a schema: nodes numbered from the root (0).

    A node is a subschema *in a dynamic scope*: a ``$dynamicRef`` (``$recursiveRef``)
    applies one subschema per evaluation, the dynamic anchor of its name in the
    outermost schema resource in scope that has one (2020-12 section 8.2.3.2), so the
    scope a subschema is reached in decides where its dynamic references go. Two scopes
    are tracked, and a dynamic reference reaches the choice of each: the specification's
    (every resource evaluation entered, the root first) and jsonschema-rs's (the
    resources of the referrers of the references followed, outermost first: walking into
    an embedded resource does not enter it there). A dynamic reference whose first
    target has no dynamic anchor of that name is a plain ``$ref`` (the bookend rule).
    """

    def __init__(self, walker: RefWalker) -> None:
        self.walker = walker
        self.nodes: list[Any] = []
        self.wheres: list[Any] = []
        self.edges: list[list[Edge]] = []
        self._index: dict[tuple[int, Scope, Scope], int] = {}
        self.again: set[int] = set()
        scoped: dict[str, dict[str, Any]] = {}
        for (base, name), node in walker.anchors.items():
            if type(node) is dict and node.get("$dynamicAnchor") == name:
                scoped.setdefault(base, {})[name] = node
        for node, base in walker.recursive_roots():
            scoped.setdefault(base, {})[_RECURSIVE] = node
        self._scoped = scoped
        self._anchor_of: dict[int, tuple[Any, str]] = {
            id(node): (node, base) for base, names in scoped.items() for node in names.values()
        }

    def _enter(self, scope: Scope, base: str) -> Scope:
        """``scope`` once the resource ``base`` is in it (outermost anchors stay)."""
        anchors = self._scoped.get(base)
        if not anchors:
            return scope
        have = dict(scope)
        fresh = {name: id(node) for name, node in anchors.items() if name not in have}
        if not fresh:
            return scope
        return tuple(sorted({**have, **fresh}.items()))

    def intern(
        self,
        node: Any,
        base: str,
        where: Any,
        todo: list[tuple[int, str, Scope, Scope]],
        scopes: tuple[Scope, Scope] = ((), ()),
    ) -> int:
        key = (id(node), *scopes)
        found = self._index.get(key)
        if found is not None:
            return found
        index = len(self.nodes)
        if index >= MAX_NODES:
            raise ToolBindError(
                self.walker.tool,
                self.walker.field,
                f"the references are too intricate to bound the work of validating one "
                f"value (rule: at most {MAX_NODES} subschemas in their dynamic scopes are "
                "explored; simplify the $ref/$dynamicRef structure)",
            )
        self._index[key] = index
        self.nodes.append(node)
        self.wheres.append(where)
        self.edges.append([])
        todo.append((index, base, *scopes))
        return index

    def build(self) -> None:
        todo: list[tuple[int, str, Scope, Scope]] = []
        self.intern(self.walker.schema, DEFAULT_BASE_URI, None, todo)
        while todo:
            index, base, spec, pushed = todo.pop()
            node = self.nodes[index]
            if type(node) is not dict:
                continue
            if self.walker.has_ids:
                base = self.walker.base_of(node, base)
            spec = self._enter(spec, base)
            where = self.wheres[index]
            out = self.edges[index]
            if "unevaluatedProperties" in node or "unevaluatedItems" in node:
                # the validator evaluates the in-place siblings again to collect the
                # locations they evaluated: counted as a second application of each
                self.again.add(index)

            def add(
                child: Any,
                at: Any,
                label: Any,
                base: str = base,
                out: list[Edge] = out,
                scopes: tuple[Scope, Scope] = (spec, pushed),
            ) -> None:
                out.append((self.intern(child, base, at, todo, scopes), label))

            self._applicators(node, where, add)
            for key in _REF_KEYWORDS:
                reference = node.get(key)
                if type(reference) is str:
                    at = (where, key)
                    self._reference(key, reference, at, base, (spec, pushed), out, todo)

    def _reference(
        self,
        key: str,
        reference: str,
        at: Any,
        base: str,
        scopes: tuple[Scope, Scope],
        out: list[Edge],
        todo: list[tuple[int, str, Scope, Scope]],
    ) -> None:
        """Add to ``out`` the in-place edges of a reference written where the base is ``base``."""
        spec, pushed = scopes[0], self._enter(scopes[1], base)  # the referrer's resource
        scopes = (spec, pushed)
        target, target_base = self.walker.lookup(base, reference, at)
        name = None
        if key == "$dynamicRef" and "#" in reference:
            name = reference.rpartition("#")[2]
            if not (type(target) is dict and target.get("$dynamicAnchor") == name):
                name = None  # the bookend rule: a plain $ref
        elif key == "$recursiveRef" and type(target) is dict:
            name = _RECURSIVE if target.get("$recursiveAnchor") is True else None
        chosen = {id(target): (target, target_base)}
        if name is not None:
            chosen = {}
            for scope in (spec, pushed):
                anchor = dict(scope).get(name)
                pick = self._anchor_of[anchor] if anchor is not None else (target, target_base)
                chosen[id(pick[0])] = pick
        for candidate, candidate_base in chosen.values():
            out.append((self.intern(candidate, candidate_base, at, todo, scopes), None))

    @staticmethod
    def _applicators(node: dict[str, Any], where: Any, add: Any) -> None:
        for key, value in node.items():
            at = (where, key)
            kind = type(value)
            if key in _IN_PLACE_ONE:
                add(value, at, None)
            elif key in _IN_PLACE_LIST and kind is list:
                for position, item in enumerate(value):
                    add(item, (at, position), None)
            elif key in _MAPS and kind is dict:
                label = _MAPS[key]
                for name, item in value.items():
                    if type(item) is not list:  # a list under dependencies names properties
                        add(item, (at, name), ("p", name) if label == "p" else label)
            elif key in ("items", "prefixItems") and kind is list:
                for position, item in enumerate(value):
                    add(item, (at, position), ("i", position))
            elif key in _WILD:
                add(value, at, _WILD[key])


_MAPS: dict[str, Any] = {
    "dependentSchemas": None,
    "dependencies": None,
    "properties": "p",
    "patternProperties": "p*",
}
"""Keywords mapping names to subschemas -> how each applies (``"p"``: to that member)."""

_WILD: dict[str, str] = {
    **dict.fromkeys(_OBJECT_WILD, "p*"),
    **dict.fromkeys((*_ARRAY_WILD, "items"), "i*"),
}
"""Keywords with one subschema applied to any member (``p*``) or element (``i*``)."""


def _topological(graph: _Graph, tool: str, field: str) -> list[int]:
    """In-place edges in topological order; a cycle of them is refused."""
    count = len(graph.nodes)
    state = [0] * count  # 0 new, 1 on the stack, 2 done
    order: list[int] = []
    for start in range(count):
        if state[start]:
            continue
        work: list[tuple[int, int]] = [(start, 0)]
        state[start] = 1
        while work:
            node, position = work.pop()
            edges = graph.edges[node]
            while position < len(edges) and edges[position][1] is not None:
                position += 1
            if position == len(edges):
                state[node] = 2
                order.append(node)
                continue
            work.append((node, position + 1))
            target = edges[position][0]
            if state[target] == 1:
                raise ToolBindError(
                    tool,
                    field_path(field, flatten(graph.wheres[target])),
                    "a cycle of in-place references never reaches a child value (rule: every "
                    "cycle of $ref/$dynamicRef must pass through a keyword that applies to a "
                    "member or element, such as properties or items; the validator would "
                    "loop on one value)",
                )
            if state[target] == 0:
                state[target] = 1
                work.append((target, 0))
    order.reverse()
    return order


def applications_per_value(
    walker: RefWalker, *, limit: int, max_depth: int, tool: str, field: str
) -> int:
    """The most subschemas a validator applies to one value of an instance.

    Args:
        walker: the schema's resolver (indexed when the schema has identifiers).
        limit: the count past which the exact value no longer matters.
        max_depth: the deepest instance location to consider (the arguments' depth limit).
        tool: the tool name, for errors.
        field: the schema's field name, for errors.

    Returns:
        The bound, saturated at ``limit + 1``.

    Raises:
        ToolBindError: a cycle of in-place references; a structure needing more than
            :data:`MAX_STATES` states to bound; a reference that does not resolve.

    """
    graph = _Graph(walker)
    graph.build()
    again = graph.again
    order = _topological(graph, tool, field)
    rank = {node: position for position, node in enumerate(order)}
    cap = limit + 1
    seen: set[tuple[tuple[int, int], ...]] = set()
    frontier: list[dict[int, int]] = [{0: 1}]
    worst = 0
    for _depth in range(max_depth + 1):
        following: list[dict[int, int]] = []
        for entries in frontier:
            key = tuple(sorted(entries.items()))
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > MAX_STATES:
                raise ToolBindError(
                    tool,
                    field,
                    f"the references are too intricate to bound the work of validating one "
                    f"value (rule: at most {MAX_STATES} combinations of subschemas that apply "
                    "together are explored; simplify the $ref structure)",
                )
            closure = _closure(graph, entries, rank, again, cap)
            total = min(sum(closure.values()), cap)
            worst = max(worst, total)
            if worst > limit:
                return cap
            following.extend(_children_states(graph, closure, cap))
        if not following:
            break
        frontier = following
    return worst


def _closure(
    graph: _Graph, entries: dict[int, int], rank: dict[int, int], again: set[int], cap: int
) -> dict[int, int]:
    """Paths (counts) to every subschema applied in place from ``entries``."""
    reached = set(entries)
    stack = list(entries)
    while stack:
        node = stack.pop()
        for target, label in graph.edges[node]:
            if label is None and target not in reached:
                reached.add(target)
                stack.append(target)
    counts = dict.fromkeys(reached, 0)
    for node, count in entries.items():
        counts[node] = count
    for node in sorted(reached, key=rank.__getitem__):
        count = counts[node]
        if not count:
            continue
        weight = 2 if node in again else 1
        for target, label in graph.edges[node]:
            if label is None:
                counts[target] = min(counts[target] + count * weight, cap)
    return counts


def _children_states(graph: _Graph, closure: dict[int, int], cap: int) -> list[dict[int, int]]:
    """The entry states of a child value, one per distinct key that matters."""
    literal: dict[Any, list[tuple[int, int]]] = {}
    wild: dict[str, list[tuple[int, int]]] = {"p*": [], "i*": []}
    for node, count in closure.items():
        for target, label in graph.edges[node]:
            if label is None:
                continue
            if type(label) is str:
                wild[label].append((target, count))
            else:
                literal.setdefault(label, []).append((target, count))
    states: list[dict[int, int]] = []
    for kind in ("p", "i"):
        wildcards = wild[kind + "*"]
        if wildcards:
            states.append(_sum(wildcards, cap))
        for label, hits in literal.items():
            if label[0] == kind:
                states.append(_sum(hits + wildcards, cap))
    return states


def _sum(hits: list[tuple[int, int]], cap: int) -> dict[int, int]:
    state: dict[int, int] = {}
    for target, count in hits:
        state[target] = min(state.get(target, 0) + count, cap)
    return state
