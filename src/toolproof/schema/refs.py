"""Local references of a declared JSON Schema: resolved inside the declaration, never fetched.

A declaration may point into itself with ``$ref`` (``#/$defs/X``, ``#/properties/a``,
legacy ``#/definitions/X``, anchors ``#name``), into an *embedded* resource that it
names with ``$id`` (``urn:example:part#/$defs/X``, ``other.json#/x``), recursively or
in chains. Anything else — ``http:``, ``file:``, a URN or a relative path that no
embedded ``$id`` names — is a **remote** reference and is refused at bind time:
binding never reads a file or the network.

:class:`RefWalker` resolves references (RFC 3986 section 5.2 for URI resolution,
RFC 6901 for JSON Pointer fragments) and compares identifiers as the validator does:
resolved against its default base ``json-schema:///`` and normalized
(:mod:`toolproof.schema.uris`); :mod:`toolproof.schema.expansion` uses it to
visit every reference reachable from the root and count what they expand to.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from toolproof.errors import ToolBindError
from toolproof.schema.uris import DEFAULT_BASE_URI, normalize_uri, resolve_uri
from toolproof.schema.validation import MAP_KEYWORDS, SUBSCHEMA_KEYWORDS, SUBSCHEMA_LIST_KEYWORDS

__all__ = [
    "DEFAULT_BASE_URI",
    "DIALECTS",
    "RefWalker",
    "dialect_of",
    "field_path",
    "flatten",
    "resolve_uri",
]

DIALECTS: dict[str, int] = {
    "https://json-schema.org/draft/2020-12/schema": 2020,
    "https://json-schema.org/draft/2019-09/schema": 2019,
    "http://json-schema.org/draft-07/schema": 7,
    "https://json-schema.org/draft-07/schema": 7,
    "http://json-schema.org/draft-06/schema": 6,
    "https://json-schema.org/draft-06/schema": 6,
    "http://json-schema.org/draft-04/schema": 4,
    "https://json-schema.org/draft-04/schema": 4,
    "http://json-schema.org/schema": 2020,
}
"""``$schema`` values (without a trailing ``#``) -> draft; no ``$schema`` means 2020-12."""

_SIMPLE_KEY_RE = re.compile(r"^[A-Za-z0-9_$-]+$")


def dialect_of(schema: dict[str, Any], *, tool: str, field: str) -> int:
    """Return the draft a schema declares with ``$schema`` (2020 when absent).

    Raises:
        ToolBindError: ``$schema`` is not a string naming a known draft (a custom
            metaschema would have to be fetched).

    """
    declared = schema.get("$schema")
    if declared is None:
        return 2020
    if isinstance(declared, str) and declared.rstrip("#") in DIALECTS:
        return DIALECTS[declared.rstrip("#")]
    known = ", ".join(sorted({uri for uri in DIALECTS if uri.startswith("https")}))
    raise ToolBindError(
        tool,
        f"{field}.$schema",
        f"unknown dialect {declared!r} (rule: only the published drafts are supported: {known})",
    )


def field_path(field: str, parts: tuple[str | int, ...]) -> str:
    """A readable schema location, for errors.

    ``input_schema`` and ``("properties", "a.b", "$ref")`` give
    ``input_schema.properties["a.b"].$ref``.
    """
    out = [field]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _SIMPLE_KEY_RE.match(part):
            out.append(f".{part}")
        else:
            out.append("[" + repr(part).replace("'", '"') + "]")
    return "".join(out)


class RefWalker:
    """Resolve the references of one declared schema, inside it only.

    Args:
        schema: the (copied) schema document.
        tool: the tool name, for errors.
        field: the schema's field name (``input_schema``), for errors.
        draft: the declared draft (see :func:`dialect_of`).

    """

    def __init__(self, schema: Any, *, tool: str, field: str, draft: int) -> None:
        self.schema = schema
        self.tool = tool
        self.field = field
        self.draft = draft
        self.resources: dict[str, Any] = {}
        self.anchors: dict[tuple[str, str], Any] = {}
        self.bases: dict[int, str] = {}
        self._resolved: dict[tuple[str, str], tuple[Any, str]] = {}
        self._recursive: list[tuple[Any, str]] = []
        self.has_ids = True
        """Whether a subschema may carry ``$id``; False skips base-URI tracking."""
        self.recursive = False
        """Set by the expansion walks once a reference re-enters a target it is inside."""
        root_base = self.base_of(schema, DEFAULT_BASE_URI)
        self.root_base = root_base
        self.resources[root_base] = schema
        self.resources.setdefault(DEFAULT_BASE_URI, schema)
        self.bases[id(schema)] = DEFAULT_BASE_URI

    def base_of(self, node: dict[str, Any], base: str) -> str:
        """The base URI inside ``node``, given the base URI around it (its ``$id`` applied).

        Both are normalized (:func:`~toolproof.schema.uris.normalize_uri`), so one
        resource has one base however its identifier is spelled.
        """
        key = "id" if self.draft == 4 else "$id"
        ident = node.get(key)
        if type(ident) is not str or (
            self.draft <= 7 and (ident.startswith("#") or "$ref" in node)
        ):
            return base  # up to draft-07 every sibling of $ref is ignored, $id included
        return normalize_uri(resolve_uri(base, ident).partition("#")[0])

    def index(self) -> None:
        """Record every embedded resource (``$id``) and anchor, with its base URI.

        Raises:
            ToolBindError: an identifier is not unique: two subschemas with the same
                ``$id`` once resolved and normalized (``URN:L`` is ``urn:L``, ``%4C`` is
                ``L``; see :func:`~toolproof.schema.uris.normalize_uri`), or one equal to
                the root's or to the default base ``json-schema:///``, or two with the
                same ``$anchor`` /
                ``$dynamicAnchor`` name in one resource. Validators disagree on which
                one a reference means, so the limits could not be computed on the
                resolution the validator uses; ``field`` names the second one.
            ToolBindError: an embedded resource declares another ``$schema`` dialect.

        """
        stack: list[tuple[Any, str, Any]] = [(self.schema, DEFAULT_BASE_URI, None)]
        id_key = "id" if self.draft == 4 else "$id"
        owners: dict[str, Any] = {DEFAULT_BASE_URI: None}
        if self.root_base != DEFAULT_BASE_URI:
            owners[self.root_base] = None
        anchor_owners: dict[tuple[str, str], Any] = {}
        while stack:
            node, base, where = stack.pop()
            if type(node) is not dict:
                continue
            self.bases[id(node)] = base
            ident = node.get(id_key)
            if type(ident) is str and not (self.draft <= 7 and "$ref" in node):
                if self.draft <= 7 and ident.startswith("#"):
                    self._add_anchor(anchor_owners, (base, ident[1:]), node, (where, id_key))
                elif node is self.schema:
                    base = self.root_base
                else:
                    base = normalize_uri(resolve_uri(base, ident).partition("#")[0])
                    if base in owners:
                        what = f"{id_key} {ident!r}"
                        if base != ident:
                            what += f" (resolved and normalized: {base!r})"
                        self._duplicate(what, (where, id_key), owners[base])
                    owners[base] = where
                    self.resources[base] = node
                    self._check_dialect(node, where)
            for anchor_key in ("$anchor", "$dynamicAnchor"):
                anchor = node.get(anchor_key)
                if type(anchor) is str:
                    self._add_anchor(anchor_owners, (base, anchor), node, (where, anchor_key))
            if node.get("$recursiveAnchor") is True:
                self._recursive.append((node, base))
            stack.extend((child, base, at) for child, at in _children_at(node, where))

    def recursive_roots(self) -> list[tuple[Any, str]]:
        """``(node, base URI)`` of each subschema with ``"$recursiveAnchor": true``."""
        return list(self._recursive)

    def _add_anchor(
        self, owners: dict[tuple[str, str], Any], key: tuple[str, str], node: Any, where: Any
    ) -> None:
        known = self.anchors.get(key)
        if known is not None and known is not node:
            self._duplicate(f"anchor {key[1]!r}", where, owners[key])
        self.anchors[key] = node
        owners.setdefault(key, where)

    def _duplicate(self, what: str, where: Any, first: Any) -> None:
        first_text = field_path(self.field, flatten(first))
        raise ToolBindError(
            self.tool,
            field_path(self.field, flatten(where)),
            f"{what} is not unique: {first_text} has it too (rule: every $id, $anchor and "
            "$dynamicAnchor must be unique in the schema, identifiers compared as URIs resolved "
            f"against {DEFAULT_BASE_URI!r} and normalized by RFC 3986 and RFC 8141, since "
            "validators disagree on which one a reference names and the limits must be "
            "computed on the validator's resolution)",
        )

    def _check_dialect(self, node: dict[str, Any], where: Any) -> None:
        declared = node.get("$schema")
        if declared is None:
            return
        if isinstance(declared, str) and DIALECTS.get(declared.rstrip("#")) == self.draft:
            return
        raise ToolBindError(
            self.tool,
            field_path(self.field, (*flatten(where), "$schema")),
            f"embedded resource declares dialect {declared!r} (rule: one dialect per "
            "declaration, the root's; resolution differs between drafts)",
        )

    def lookup(self, base: str, reference: str, where: Any) -> tuple[Any, str]:
        """Return ``(target, base URI at the target)`` of ``reference`` written at ``where``.

        ``where`` is a linked path (``(parent, part)`` pairs, ``None`` at the root; see
        :func:`flatten`), used only to name the reference in an error.

        Raises:
            ToolBindError: the reference is remote, or local but does not resolve.

        """
        key = (base, reference)
        found = self._resolved.get(key)
        if found is None:
            found = self._lookup(base, reference, where)
            self._resolved[key] = found
        return found

    def _lookup(self, base: str, reference: str, where: Any) -> tuple[Any, str]:
        if reference.startswith("#"):  # RFC 3986 5.2.2 for a fragment-only reference
            document, fragment = base, reference[1:]
        else:
            document, _, fragment = resolve_uri(base, reference).partition("#")
            document = normalize_uri(document)
        resource = self.resources.get(document)
        field = field_path(self.field, flatten(where))
        if resource is None:
            raise ToolBindError(
                self.tool,
                field,
                f"remote $ref {reference!r} is refused (rule: only references inside the "
                "declaration resolve: '#...' fragments and resources embedded with $id; "
                "nothing is fetched)",
            )
        fragment = unquote(fragment)
        if not fragment:
            return resource, self.bases.get(id(resource), document)
        if not fragment.startswith("/"):
            target = self.anchors.get((document, fragment))
            if target is None:
                raise ToolBindError(
                    self.tool,
                    field,
                    f"$ref {reference!r} does not resolve: no anchor {fragment!r} in the schema",
                )
            return target, self.bases.get(id(target), document)
        node, node_base = resource, document
        for token in fragment[1:].split("/"):
            name = token.replace("~1", "/").replace("~0", "~")
            if type(node) is dict and name in node:
                node_base = self.base_of(node, node_base) if node is not resource else node_base
                node = node[name]
            elif type(node) is list and name.isdigit() and int(name) < len(node):
                node = node[int(name)]
            else:
                raise ToolBindError(
                    self.tool,
                    field,
                    f"$ref {reference!r} does not resolve: JSON Pointer {fragment!r} names "
                    f"nothing at {name!r} (rule: local references must point into the schema)",
                )
        return node, self.bases.get(id(node), node_base)


def flatten(where: Any) -> tuple[str | int, ...]:
    """``((None, "properties"), "a")`` (a linked path, root first) -> ``("properties", "a")``."""
    parts: list[str | int] = []
    while where is not None:
        where, part = where
        parts.append(part)
    return tuple(reversed(parts))


def _children_at(node: dict[str, Any], where: Any) -> list[tuple[Any, Any]]:
    """The subschemas directly under ``node``, each with its linked path."""
    out: list[tuple[Any, Any]] = []
    for key, value in node.items():
        at = (where, key)
        if key in SUBSCHEMA_KEYWORDS or key in SUBSCHEMA_LIST_KEYWORDS:
            if type(value) is list:
                out.extend((item, (at, index)) for index, item in enumerate(value))
            elif key in SUBSCHEMA_KEYWORDS:
                out.append((value, at))
        elif (key in MAP_KEYWORDS or key == "dependencies") and type(value) is dict:
            out.extend((item, (at, name)) for name, item in value.items())
    return out
