"""``toolproof.lock``: the pinned tool inventory of a composition root, and its drift.

The lock lists every bound tool and variant, sorted by name::

    {"schema_version": 1,
     "tools": [{"name": "git_status", "source": {"mcp": "git", "command": [...],
                "tool": "git_status", "server": {"name": "mcp-git", "version": "1.2"}},
                "spec": {"name": ..., "version": ..., "title": ..., "description": ...,
                         "inputSchema": {...}, "outputSchema": {...}, "annotations": {...}},
                "spec_digest": "sha256:...", "fingerprint": "sha256:...", "base": null,
                "lint": [{"rule", "severity", "field", "key", "offset", "byte_offset",
                          "text"}, ...]}, ...]}

written as canonical JSON (RFC 8785), so the same inventory gives the same bytes; the
lock's digest is ``sha256`` of those bytes. A variant (``base`` set) is pinned by its
fingerprint only; a base tool by its full spec (with an MCP tool's ``_meta`` and
``icons`` as the server listed them), so a change is reported field by field: a JSON
pointer (RFC 6901), the old value and the new one. A base tool's lint findings
(:mod:`toolproof.tools.lint`) are pinned too, so a new finding (a description that now
names another server's tool) is drift at ``/lint``. Loading checks the base tools
before extensions apply (:func:`check_toolset_lock`) and the variants after
(:func:`check_variant_lock`).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, JsonValue, ValidationError

from toolproof.contract.base import CanonicalModel
from toolproof.errors import ConfigError, validation_problem
from toolproof.identity import canonical_json, digest, digest_json
from toolproof.tools.definition import locked_spec
from toolproof.tools.lint_toolset import toolset_findings
from toolproof.tools.resources import LOCK_DIGEST, LOCK_DRIFT, LOCK_PATH, MCP_SERVERS
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = [
    "LOCK_FILE",
    "Change",
    "Drift",
    "LockedTool",
    "Lockfile",
    "OnDrift",
    "build_lock",
    "check_toolset_lock",
    "check_variant_lock",
    "diff_json",
    "diff_locks",
    "locked_spec",
    "read_lock",
    "write_lock",
]

LOCK_FILE = "toolproof.lock"
_ABSENT: Any = object()


class OnDrift(StrEnum):
    """What loading does when the tools differ from the lock (``[lock] on_drift``).

    ``quarantine`` (default): drifted, new and vanished tools are quarantined with
    their diff, every other tool binds. ``refuse``: loading fails naming every
    drift. ``warn``: everything binds; the drift is logged and listed.
    """

    QUARANTINE = "quarantine"
    REFUSE = "refuse"
    WARN = "warn"


class LockedTool(CanonicalModel):
    """One tool or variant in the lock.

    Attributes:
        name: the bound name.
        source: where it comes from (``{"python": "pkg.mod.fn"}``, ``{"mcp": server,
            "command"|"url", "tool": reported name, "server": serverInfo}``).
        spec: the full spec of a base tool (MCP field names); ``None`` for a variant.
        spec_digest: ``sha256`` of the canonical JSON of ``spec``.
        fingerprint: the tool's descriptor fingerprint.
        base: the base tool of a variant; ``None`` for a base tool.
        lint: a base tool's lint findings (``Finding.locked()`` each, ``[]`` when
            clean); ``None`` (left out of the file) for a variant and in a lock written
            before the lint existed, which then compares no findings.

    """

    name: str
    source: dict[str, JsonValue] = Field(default_factory=dict)
    spec: dict[str, JsonValue] | None = None
    spec_digest: str | None = None
    fingerprint: str
    base: str | None = None
    lint: list[dict[str, JsonValue]] | None = None


class Lockfile(CanonicalModel):
    """``toolproof.lock``: every tool and variant, sorted by name (unique)."""

    tools: list[LockedTool]

    def by_name(self) -> dict[str, LockedTool]:
        """The entries by tool name."""
        return {entry.name: entry for entry in self.tools}

    def to_json(self) -> dict[str, Any]:
        """The file as JSON: an entry's ``lint`` is left out when ``None``.

        So a lock written before the lint existed reads back to the same bytes.
        """
        out = super().to_json()
        for entry in out["tools"]:
            if entry.get("lint") is None:
                entry.pop("lint", None)
        return out

    def canonical_bytes(self) -> bytes:
        """The file's bytes: canonical JSON (RFC 8785)."""
        return canonical_json(self.to_json())

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of :meth:`canonical_bytes`: the lock digest runs record."""
        return digest(self.canonical_bytes())


def _source(toolset: Toolset, tool: Tool) -> dict[str, Any]:
    kind, _, ref = tool.source.partition(":")
    if kind != "mcp":
        return {kind or "source": ref or tool.source}
    servers = toolset.resources.get(MCP_SERVERS) or {}
    entry: dict[str, Any] = servers.get(ref, {})
    source: dict[str, Any] = {"mcp": ref, **entry.get("transport", {})}
    source["tool"] = entry.get("names", {}).get(tool.name, tool.name)
    info = entry.get("server_info") or {}
    source["server"] = {key: info[key] for key in ("name", "version") if key in info}
    return source


def _extras(toolset: Toolset, tool: Tool) -> dict[str, Any]:
    """An MCP tool's ``_meta`` and ``icons`` as its server listed them (``{}`` otherwise)."""
    kind, _, ref = tool.source.partition(":")
    if kind != "mcp":
        return {}
    entry: dict[str, Any] = (toolset.resources.get(MCP_SERVERS) or {}).get(ref, {})
    extras: dict[str, Any] = entry.get("pinned", {}).get(tool.name, {})
    return extras


def build_lock(toolset: Toolset) -> Lockfile:
    """The lock of every tool and variant ``toolset`` binds now.

    A base tool's ``lint`` is its findings at bind (``resources[LINT_FINDINGS]``), or
    linted now for a Toolset built without a config.
    """
    entries = []
    findings = toolset_findings(toolset)
    for tool in toolset:
        descriptor = tool.descriptor()
        if tool.base is None:
            spec = {**locked_spec(tool.spec), **_extras(toolset, tool)}
            entries.append(
                LockedTool(
                    name=tool.name,
                    source=_source(toolset, tool),
                    spec=spec,
                    spec_digest=digest_json(spec),
                    fingerprint=descriptor.fingerprint,
                    lint=[finding.locked() for finding in findings.get(tool.name, ())],
                )
            )
        else:
            entries.append(
                LockedTool(
                    name=tool.name,
                    source=_source(toolset, tool),
                    fingerprint=descriptor.fingerprint,
                    base=tool.base,
                )
            )
    return Lockfile(tools=entries)


def read_lock(path: Path) -> Lockfile:
    """Read and check a lock file.

    Raises:
        ConfigError: the file is missing, not a lock, or not canonical JSON.

    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), "(file)", f"cannot read the lock: {exc.strerror}") from None
    try:
        lock = Lockfile.model_validate_json(raw)
    except ValidationError as exc:
        first = validation_problem(exc, empty="(document)")
        raise ConfigError(
            str(path), first.where, f"not a toolproof.lock: {first.message}"
        ) from None
    if lock.canonical_bytes() != raw:
        raise ConfigError(str(path), "(file)", "the lock is not canonical JSON (RFC 8785)")
    names = [entry.name for entry in lock.tools]
    if names != sorted(set(names)):
        raise ConfigError(str(path), "tools", "lock entries must be sorted by name and unique")
    return lock


def write_lock(path: Path, lock: Lockfile) -> str:
    """Write ``lock`` to ``path`` atomically (temporary file, fsync, rename); return its digest."""
    data = lock.canonical_bytes()
    fd, temp = tempfile.mkstemp(prefix=".tmp-lock-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return lock.digest


@dataclass(frozen=True)
class Change:
    """One changed value: its JSON pointer (RFC 6901), the old and the new value.

    ``old``/``new`` are absent (``has_old``/``has_new`` False) for an added or a
    removed member.
    """

    pointer: str
    old: Any = None
    new: Any = None
    has_old: bool = True
    has_new: bool = True

    def to_json(self) -> dict[str, Any]:
        """``{"pointer", "old"?, "new"?}`` (a missing side is left out)."""
        out: dict[str, Any] = {"pointer": self.pointer}
        if self.has_old:
            out["old"] = self.old
        if self.has_new:
            out["new"] = self.new
        return out

    def __str__(self) -> str:
        old = canonical_json(self.old).decode() if self.has_old else "(absent)"
        new = canonical_json(self.new).decode() if self.has_new else "(absent)"
        return f"{self.pointer or '/'}: {_cut(old)} -> {_cut(new)}"


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def diff_json(old: Any, new: Any, pointer: str = "") -> list[Change]:
    """Every difference between two JSON values, as JSON pointers, in document order."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[Change] = []
        for key in sorted(set(old) | set(new)):
            where = f"{pointer}/{_escape(str(key))}"
            if key not in new:
                changes.append(Change(where, old=old[key], has_new=False))
            elif key not in old:
                changes.append(Change(where, new=new[key], has_old=False))
            else:
                changes += diff_json(old[key], new[key], where)
        return changes
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            change
            for index, (a, b) in enumerate(zip(old, new, strict=True))
            for change in diff_json(a, b, f"{pointer}/{index}")
        ]
    if type(old) is not type(new) or old != new:
        return [Change(pointer, old=old, new=new)]
    return []


@dataclass(frozen=True)
class Drift:
    """A tool that differs from the lock.

    Attributes:
        name: the tool name.
        kind: ``changed``, ``new`` (not in the lock) or ``vanished`` (locked, not bound).
        changes: the field-level diff (for ``changed``).
        owner: where the tool comes from now (or came from, when vanished).

    """

    name: str
    kind: str
    changes: tuple[Change, ...] = ()
    owner: str = ""

    def rule(self) -> str:
        """The drift in one line, for a quarantine record and the CLI."""
        if self.kind == "new":
            return "not in toolproof.lock (a new tool: review it, then toolproof lock --update)"
        if self.kind == "vanished":
            return "in toolproof.lock but no longer offered by its source"
        shown = "; ".join(str(change) for change in self.changes)
        return f"differs from toolproof.lock: {shown}"

    def to_json(self) -> dict[str, Any]:
        """``{"name", "kind", "changes": [{"pointer", "old", "new"}...]}``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "changes": [change.to_json() for change in self.changes],
        }


@dataclass
class _Sides:
    old: dict[str, LockedTool] = field(default_factory=dict)
    new: dict[str, LockedTool] = field(default_factory=dict)


def _entry_changes(old: LockedTool, new: LockedTool) -> list[Change]:
    if old.base is None and new.base is None:
        changes = diff_json(old.spec, new.spec)
        changes += diff_json(old.source, new.source, "/source")
        if old.lint is not None and new.lint is not None:  # an old lock pins no findings
            changes += diff_json(old.lint, new.lint, "/lint")
        return changes
    if old.base != new.base:
        return [Change("/base", old=old.base, new=new.base)]
    if old.fingerprint != new.fingerprint:
        return [Change("/fingerprint", old=old.fingerprint, new=new.fingerprint)]
    return []


def diff_locks(
    old: Lockfile, new: Lockfile, *, bases_only: bool = False, variants_only: bool = False
) -> list[Drift]:
    """Every tool that differs between the locked inventory and the current one, by name.

    Args:
        old: the lock on disk.
        new: :func:`build_lock` of what binds now.
        bases_only: compare base tools only (loading, before extensions apply).
        variants_only: compare variants only (loading, after extensions apply).

    """
    sides = _Sides(old.by_name(), new.by_name())
    drifts = []
    for name in sorted(set(sides.old) | set(sides.new)):
        before, after = sides.old.get(name), sides.new.get(name)
        entry = after or before
        assert entry is not None
        if (bases_only and entry.base is not None) or (variants_only and entry.base is None):
            continue
        owner = next(iter(entry.source), "")
        owner = f"{owner}:{entry.source[owner]}" if owner else ""
        if before is None:
            drifts.append(Drift(name, "new", owner=owner))
        elif after is None:
            drifts.append(Drift(name, "vanished", owner=owner))
        else:
            changes = _entry_changes(before, after)
            if changes:
                drifts.append(Drift(name, "changed", tuple(changes), owner=owner))
    return drifts


def check_toolset_lock(
    toolset: Toolset, lock_path: Path, on_drift: OnDrift = OnDrift.QUARANTINE
) -> list[Drift]:
    """Check the (unsealed) base tools of ``toolset`` against the lock at ``lock_path``.

    The lock's digest goes into ``toolset.resources[LOCK_DIGEST]`` (and so into the
    descriptor). Per ``on_drift``: ``quarantine`` withdraws every changed and new
    tool and records every vanished one (field ``lock``, the diff in ``drift``), so
    their variants are quarantined too and every other tool still binds; ``refuse``
    raises; ``warn`` binds everything. The drifts go into
    ``toolset.resources[LOCK_DRIFT]`` either way. A locked tool that is already
    quarantined (by the lint, or by its source) is not acted on as vanished: its own
    record says why it is not bound.

    Returns:
        The drifts, by tool name.

    Raises:
        ConfigError: the lock cannot be read, or ``on_drift`` is ``refuse`` and a
            tool drifted (the message lists every drift).

    """
    lock = read_lock(lock_path)
    toolset.resources[LOCK_DIGEST] = lock.digest
    toolset.resources[LOCK_PATH] = str(lock_path)
    drifts = diff_locks(lock, build_lock(toolset), bases_only=True)
    toolset.resources[LOCK_DRIFT] = [drift.to_json() for drift in drifts]
    # a tool quarantined already (by the lint, say) did not vanish: its record says why
    quarantined = {item.name for item in toolset.quarantined}
    acted = [d for d in drifts if not (d.kind == "vanished" and d.name in quarantined)]
    _act(toolset, lock_path, on_drift, acted)
    return drifts


def check_variant_lock(
    toolset: Toolset, lock_path: Path, on_drift: OnDrift = OnDrift.QUARANTINE
) -> list[Drift]:
    """Check the variants of ``toolset`` (extensions applied, unsealed) against the lock.

    The second half of the load-time check (:func:`check_toolset_lock` did the base
    tools): each variant is compared by its fingerprint, which covers its base's spec
    and source and its extension stack with every parameter. A variant of a base tool
    that is not bound (quarantined by the lock, say) is not compared: it is quarantined
    with its base already. Drifts are handled per ``on_drift`` as for base tools and
    added to ``toolset.resources[LOCK_DRIFT]``.

    Returns:
        The variants' drifts, by name.

    Raises:
        ConfigError: the lock cannot be read, or ``on_drift`` is ``refuse`` and a
            variant drifted.

    """
    lock = read_lock(lock_path)
    bound = set(toolset.names())
    drifts = [
        drift
        for drift in diff_locks(lock, build_lock(toolset), variants_only=True)
        if _base_of(lock, toolset, drift.name) in bound
    ]
    toolset.resources.setdefault(LOCK_DRIFT, list).extend(drift.to_json() for drift in drifts)
    return _act(toolset, lock_path, on_drift, drifts)


def _base_of(lock: Lockfile, toolset: Toolset, name: str) -> str | None:
    tool = toolset.get(name)
    if tool is not None:
        return tool.base
    entry = lock.by_name().get(name)
    return entry.base if entry is not None else None


def _act(toolset: Toolset, lock_path: Path, on_drift: OnDrift, drifts: list[Drift]) -> list[Drift]:
    if not drifts:
        return drifts
    if on_drift is OnDrift.REFUSE:
        shown = "; ".join(f"{drift.name} {drift.rule()}" for drift in drifts)
        raise ConfigError(
            str(lock_path),
            "[lock] on_drift",
            f"{len(drifts)} tools drifted from the lock ([lock] on_drift = 'refuse'): {shown}",
        )
    if on_drift is OnDrift.QUARANTINE:
        for drift in drifts:
            toolset.withdraw(
                drift.name, "lock", drift.rule(), owner=drift.owner, drift=drift.to_json()
            )
    return drifts
