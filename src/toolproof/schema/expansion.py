"""How many subschemas a declared schema compiles to once its references are expanded.

A validator compiler inlines a ``$ref`` to a non-recursive target (each reference
site gets its own copy) and compiles a recursive target once, lazily. So a schema
of a few kilobytes whose ``$defs`` each reference the previous one ten times
("billion laughs") expands to 10^9 subschemas and hangs the compiler, while a
schema of five mutually recursive definitions stays small.

:func:`expansion_size` computes that count exactly, in time linear in the schema
(binding first tries :func:`path_expansion`, a cheaper upper bound):

1. discover every subschema reachable from the root (subschema keywords and
   resolved references, through :class:`~toolproof.schema.refs.RefWalker`, which
   refuses remote and unresolvable references);
2. find the recursive reference targets: those in a strongly connected component
   with a cycle (Tarjan's algorithm, iterative);
3. size each subschema bottom-up: itself, plus its children, plus for each
   reference the target's size (1 for a recursive target). The sums saturate just
   past the limit, so even 10^100 costs nothing to compute.
"""

from __future__ import annotations

from typing import Any

from toolproof.schema.refs import DEFAULT_BASE_URI, RefWalker, flatten
from toolproof.schema.validation import MAP_KEYWORDS, SUBSCHEMA_KEYWORDS, SUBSCHEMA_LIST_KEYWORDS

__all__ = ["Expansion", "expansion_size", "path_expansion"]

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


class Expansion:
    """The outcome of :func:`expansion_size`.

    Attributes:
        size: subschemas after expansion, saturated at ``limit + 1``.
        worst: the location (a tuple path) of the reference site nearest the root
            whose target alone expands past the limit, or ``None``.

    """

    __slots__ = ("size", "worst")

    def __init__(self, size: int, worst: tuple[str | int, ...] | None) -> None:
        self.size = size
        self.worst = worst


def _children(node: dict[str, Any], where: Any) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for key, value in node.items():
        if key in SUBSCHEMA_KEYWORDS or key in SUBSCHEMA_LIST_KEYWORDS:
            if type(value) is list:
                out.extend((item, ((where, key), index)) for index, item in enumerate(value))
            elif key in SUBSCHEMA_KEYWORDS:
                out.append((value, (where, key)))
        elif (key in MAP_KEYWORDS or key == "dependencies") and type(value) is dict:
            out.extend((item, ((where, key), name)) for name, item in value.items())
    return out


def _discover(walker: RefWalker) -> tuple[list[list[int]], list[list[tuple[int, Any]]]]:
    """Number every reachable subschema; return its child edges and reference edges."""
    index_of: dict[int, int] = {}
    bases: list[str] = []
    wheres: list[Any] = []
    nodes: list[Any] = []
    todo: list[int] = []

    def intern(node: Any, base: str, where: Any) -> int:
        found = index_of.get(id(node))
        if found is not None:
            return found
        index = len(nodes)
        index_of[id(node)] = index
        nodes.append(node)
        bases.append(base)
        wheres.append(where)
        todo.append(index)
        return index

    intern(walker.schema, DEFAULT_BASE_URI, None)
    kids: dict[int, list[int]] = {}
    refs: dict[int, list[tuple[int, Any]]] = {}
    has_ids = walker.has_ids
    while todo:
        index = todo.pop()
        node = nodes[index]
        kids[index], refs[index] = [], []
        if type(node) is not dict:
            continue
        base = walker.base_of(node, bases[index]) if has_ids else bases[index]
        where = wheres[index]
        kids[index] = [intern(child, base, at) for child, at in _children(node, where)]
        for key in _REF_KEYWORDS:
            reference = node.get(key)
            if type(reference) is str:
                at = (where, key)
                target, target_base = walker.lookup(base, reference, at)
                refs[index].append((intern(target, target_base, at), at))
    count = len(nodes)
    return [kids[i] for i in range(count)], [refs[i] for i in range(count)]


def _recursive(kids: list[list[int]], refs: list[list[tuple[int, Any]]]) -> list[bool]:
    """Which subschemas lie on a cycle (Tarjan's strongly connected components)."""
    count = len(kids)
    edges = [kids[i] + [target for target, _ in refs[i]] for i in range(count)]
    order = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    stack: list[int] = []
    cyclic = [False] * count
    counter = 0
    for start in range(count):
        if order[start] != -1:
            continue
        work: list[tuple[int, int]] = [(start, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                order[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            if edge < len(edges[node]):
                work.append((node, edge + 1))
                nxt = edges[node][edge]
                if order[nxt] == -1:
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], order[nxt])
                continue
            if low[node] == order[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    for member in component:
                        cyclic[member] = True
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return cyclic


def _push_children(node: dict[str, Any], base: str, where: Any, push: Any) -> None:
    for key, value in node.items():
        if key in SUBSCHEMA_KEYWORDS or key in SUBSCHEMA_LIST_KEYWORDS:
            if type(value) is list:
                for index, item in enumerate(value):
                    push((item, base, ((where, key), index), None))
            elif key in SUBSCHEMA_KEYWORDS:
                push((value, base, (where, key), None))
        elif (key in MAP_KEYWORDS or key == "dependencies") and type(value) is dict:
            for name, item in value.items():
                push((item, base, ((where, key), name), None))


def path_expansion(walker: RefWalker, limit: int) -> int | None:
    """An upper bound of the expansion, or ``None`` once it passes ``limit``.

    Walks the schema expanding every reference, cutting only a reference to a target
    already being expanded on the current path. That never counts less than
    :func:`expansion_size` (it expands a recursive target instead of counting it
    once), and for the usual schema it is the cheapest walk there is; the exact
    count is only needed when this bound passes the limit.

    Raises:
        ToolBindError: a reference is remote or does not resolve (from the walker).

    """
    root = walker.schema
    on_path: dict[int, int] = {id(root): 1}
    stack: list[Any] = [(root, DEFAULT_BASE_URI, None, None)]
    push = stack.append
    count = 0
    has_ids = walker.has_ids
    while stack:
        entry = stack.pop()
        if type(entry) is int:
            on_path[entry] -= 1
            continue
        node, base, where, target_id = entry
        count += 1
        if count > limit:
            return None
        if type(node) is not dict:
            continue
        if target_id is not None:
            if on_path.get(target_id):
                walker.recursive = True
                continue
            on_path[target_id] = 1
            push(target_id)
        if has_ids:
            base = walker.base_of(node, base)
        _push_children(node, base, where, push)
        for ref_key in _REF_KEYWORDS:
            reference = node.get(ref_key)
            if type(reference) is str:
                at = (where, ref_key)
                target, target_base = walker.lookup(base, reference, at)
                push((target, target_base, at, id(target)))
    return count


def expansion_size(walker: RefWalker, limit: int) -> Expansion:
    """Count the subschemas ``walker.schema`` compiles to, references expanded.

    Args:
        walker: the schema's resolver (indexed when the schema has ``$id`` s or anchors).
        limit: the count past which the exact value no longer matters.

    Returns:
        The :class:`Expansion`.

    Raises:
        ToolBindError: a reference is remote or does not resolve (from the walker).

    """
    kids, refs = _discover(walker)
    cyclic = _recursive(kids, refs)
    if any(cyclic):
        walker.recursive = True
    cap = limit + 1
    size = [0] * len(kids)
    done = [False] * len(kids)
    for start in range(len(kids)):
        if done[start]:
            continue
        work: list[tuple[int, bool]] = [(start, False)]
        while work:
            node, children_done = work.pop()
            if done[node]:
                continue
            if not children_done:
                work.append((node, True))
                work.extend((kid, False) for kid in kids[node] if not done[kid])
                work.extend((target, False) for target, _ in refs[node] if not cyclic[target])
                continue
            total = 1 + sum(size[kid] for kid in kids[node])
            total += sum(1 if cyclic[target] else size[target] for target, _ in refs[node])
            size[node] = min(total, cap)
            done[node] = True
    worst: tuple[str | int, ...] | None = None
    if size[0] > limit:
        sites = [
            flatten(at)
            for node_refs in refs
            for target, at in node_refs
            if not cyclic[target] and size[target] >= limit
        ]
        worst = min(sites, key=len) if sites else None
    return Expansion(size[0], worst)
