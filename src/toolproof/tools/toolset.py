"""``Toolset``: the sealed inventory of bound tools and variants."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from toolproof.contract.names import TOOL_NAME_RE, TOOL_NAME_RULE
from toolproof.contract.tools import ExposureRecord, ToolsetDescriptor
from toolproof.errors import ToolNameError, ToolsetSealedError, UsageError
from toolproof.tools.catalog import Catalog
from toolproof.tools.exposure import Exposure, is_gated
from toolproof.tools.policy import PolicySet
from toolproof.tools.resources import FILTERS, LOCK_DIGEST, Resources
from toolproof.tools.tool import Tool

__all__ = ["TOOL_NAME_RE", "Quarantined", "Toolset", "check_tool_name"]


def check_tool_name(name: object) -> str:
    """Return ``name`` if it matches :data:`TOOL_NAME_RE`.

    Raises:
        ToolNameError: it does not; the message quotes the rule.

    """
    if not isinstance(name, str) or TOOL_NAME_RE.match(name) is None:
        raise ToolNameError(str(name), TOOL_NAME_RULE)
    return name


@dataclass(frozen=True)
class Quarantined:
    """A tool, variant or module that could not be bound, and why.

    Attributes:
        name: the tool, variant or module name.
        field: the offending field (``input_schema.properties.x``, ``extensions[1]``).
        rule: the rule it broke.
        owner: where it came from (``mcp:git``, ``python:mod``, ``extension combo``).
        drift: for a tool that differs from ``toolproof.lock``: ``{"kind", "changes":
            [{"pointer", "old", "new"}...]}``; ``None`` otherwise.

    """

    name: str
    field: str
    rule: str
    owner: str = ""
    drift: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (with ``drift`` when the lock quarantined it)."""
        out: dict[str, Any] = {
            "name": self.name,
            "field": self.field,
            "rule": self.rule,
            "owner": self.owner,
        }
        if self.drift is not None:
            out["drift"] = self.drift
        return out


class Toolset:
    """The sealed inventory of tools and variants of one composition root.

    Add tools with :meth:`add`, record what could not be bound with
    :meth:`quarantine`, then :meth:`seal`. After sealing nothing can be added, and
    the Toolset answers lookups (``toolset[name]``), :meth:`names` and
    :meth:`descriptor`. It is an async context manager: leaving it runs the
    clean-ups registered with :meth:`on_close` (MCP sessions, worker pools) in
    reverse order.

    ``toolset.resources`` (:class:`~toolproof.tools.resources.Resources`) holds what the
    composition root and the extensions keep beside the tools, by typed key (the
    config, the MCP servers' status, the lock digest, the extension registry, backend
    clients); a client built there is closed with the Toolset.

    Outward faces (``serve``, session adapters, run specs) reach only
    :meth:`exposed` tools: the ungated siblings of a gated variant are hidden unless
    the :class:`~toolproof.tools.exposure.Exposure` policy names them
    (:mod:`toolproof.tools.exposure`).
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._owners: dict[str, str] = {}
        self._quarantined: list[Quarantined] = []
        self._refused_gates: dict[str, list[str]] = {}
        self._sealed = False
        self._descriptor: ToolsetDescriptor | None = None
        self._exposure = Exposure()
        self._policy: PolicySet | None = None
        self._hidden: dict[str, str] | None = None
        self._exit_stack = AsyncExitStack()
        self._closed = False
        self.resources = Resources(self.on_close)  # typed per-Toolset state (tools/resources.py)
        self.catalog = Catalog()  # resources, templates and prompts (tools/catalog.py)

    def add(self, tool: Tool, *, owner: str = "") -> Tool:
        """Add a tool; return it.

        Args:
            tool: the tool or variant.
            owner: who contributed it (``python:mypkg.tools``, ``mcp:git``), named in errors.

        Raises:
            ToolsetSealedError: the Toolset is sealed (a programming error).
            ToolNameError: the name breaks :data:`TOOL_NAME_RE`, or is taken; the
                message names both owners.

        """
        if self._sealed:
            raise ToolsetSealedError(tool.name)
        check_tool_name(tool.name)
        owner = owner or tool.source or "?"
        if tool.name in self._tools:
            raise ToolNameError(
                tool.name,
                f"is already taken: defined by {self._owners[tool.name]} and again by {owner} "
                "(rule: tool names are unique in a Toolset)",
            )
        self._tools[tool.name] = tool
        self._owners[tool.name] = owner
        return tool

    def replace(self, tool: Tool) -> Tool:
        """Put ``tool`` in place of the bound tool of the same name (same owner); return it.

        The composition root uses it to give a bound tool what ``toolproof.toml``
        declares about it (``[tools.NAME] idempotency``).

        Raises:
            ToolsetSealedError: the Toolset is sealed.
            KeyError: no tool of that name is bound.

        """
        if self._sealed:
            raise ToolsetSealedError(tool.name)
        if tool.name not in self._tools:
            raise KeyError(tool.name)
        self._tools[tool.name] = tool
        return tool

    def quarantine(self, name: str, field: str, rule: str, *, owner: str = "") -> None:
        """Record an item that could not be bound; the rest of the Toolset still binds.

        Raises:
            ToolsetSealedError: the Toolset is sealed.

        """
        if self._sealed:
            raise ToolsetSealedError(name)
        self._quarantined.append(Quarantined(name, field, rule, owner))

    def refuse_gate(self, base: str, name: str) -> None:
        """Record that ``name``, an ``approve``-gated variant of ``base``, did not bind.

        Its base's ungated tools stay hidden from the outward faces as if it had bound
        (:meth:`Exposure.hidden <toolproof.tools.exposure.Exposure.hidden>`, fail closed).

        Raises:
            ToolsetSealedError: the Toolset is sealed.

        """
        if self._sealed:
            raise ToolsetSealedError(name)
        self._refused_gates.setdefault(base, []).append(name)
        self._hidden = None

    def withdraw(
        self,
        name: str,
        field: str,
        rule: str,
        *,
        owner: str = "",
        drift: dict[str, Any] | None = None,
    ) -> None:
        """Remove the bound tool ``name`` again and quarantine it (before sealing).

        Used when a later check (the lock) refuses a tool that bound; without a tool of
        that name it only records the quarantine.

        Raises:
            ToolsetSealedError: the Toolset is sealed.

        """
        if self._sealed:
            raise ToolsetSealedError(name)
        withdrawn = self._tools.pop(name, None)
        if withdrawn is not None and is_gated(withdrawn):
            self.refuse_gate(withdrawn.base or withdrawn.name, name)
        owner = self._owners.pop(name, "") or owner
        self._quarantined.append(Quarantined(name, field, rule, owner, drift))

    def on_close(self, callback: Callable[[], Awaitable[Any]]) -> None:
        """Register an async clean-up run when the Toolset closes (last registered, first run)."""
        self._exit_stack.push_async_callback(callback)

    async def enter_context(self, manager: Any) -> Any:
        """Enter an async context manager now and exit it when the Toolset closes."""
        return await self._exit_stack.enter_async_context(manager)

    @property
    def policy(self) -> PolicySet | None:
        """The ``[policy]`` Cedar policy set every recorded call is decided by, or ``None``."""
        return self._policy

    def set_policy(self, policy: PolicySet) -> None:
        """Set the ``[policy]`` policy set (docs/policy.md) before sealing.

        Raises:
            RuntimeError: the Toolset is sealed.

        """
        if self._sealed:
            raise RuntimeError(
                "toolset is sealed: cannot set its policy after seal() "
                "(rule: the policy is set at the composition root, before sealing)"
            )
        self._policy = policy

    def set_exposure(self, exposure: Exposure) -> None:
        """Set the exposure policy (``[serve] expose``/``hide``) before sealing.

        Raises:
            UsageError: the Toolset is sealed (what it exposes is fixed with its tools).

        """
        if self._sealed:
            raise UsageError(
                "toolset is sealed: cannot set its exposure policy after seal() "
                "(rule: exposure is set at the composition root, before sealing)"
            )
        self._exposure = exposure
        self._hidden = None

    @property
    def exposure(self) -> Exposure:
        """The exposure policy (empty unless :meth:`set_exposure` was called)."""
        return self._exposure

    def hidden(self) -> dict[str, str]:
        """The tools the outward faces do not expose: ``{name: reason}``, sorted by name.

        Computed once sealed; see :meth:`Exposure.hidden
        <toolproof.tools.exposure.Exposure.hidden>`.
        """
        if self._hidden is not None:
            return self._hidden
        hidden = self._exposure.hidden(self._tools.values(), self._refused_gates)
        if self._sealed:
            self._hidden = hidden
        return hidden

    def exposed(self) -> list[Tool]:
        """The tools the outward faces expose (every tool not :meth:`hidden`), sorted by name."""
        hidden = self.hidden()
        return [tool for tool in self if tool.name not in hidden]

    def exposed_tool(self, name: str) -> Tool | None:
        """The exposed tool named ``name``, or ``None`` (no such tool, or hidden)."""
        return None if name in self.hidden() else self._tools.get(name)

    def seal(self) -> Self:
        """Seal the Toolset: no tool can be added after this. Idempotent; returns ``self``."""
        self._sealed = True
        return self

    @property
    def sealed(self) -> bool:
        """Whether :meth:`seal` was called."""
        return self._sealed

    @property
    def quarantined(self) -> tuple[Quarantined, ...]:
        """What could not be bound, in the order it was recorded."""
        return tuple(self._quarantined)

    def owner(self, name: str) -> str:
        """Who contributed the tool ``name``.

        Raises:
            KeyError: no such tool.

        """
        return self._owners[name]

    def names(self) -> list[str]:
        """Every tool and variant name, sorted."""
        return sorted(self._tools)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            for item in self._quarantined:
                if item.name == name:
                    raise KeyError(
                        f"tool {name!r} is quarantined: {item.field}: {item.rule}"
                    ) from None
            known = ", ".join(self.names()) or "none"
            raise KeyError(f"no tool named {name!r} in this toolset (known: {known})") from None

    def get(self, name: str) -> Tool | None:
        """The tool named ``name``, or ``None``."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._tools)

    def descriptor(self) -> ToolsetDescriptor:
        """Every tool's descriptor, sorted by name; cached once sealed.

        Its ``id``/``digest`` depends only on the tools' specs, sources and stacks, so it
        is identical across processes and Python hash seeds.
        """
        if self._descriptor is not None:
            return self._descriptor
        filters = self.resources.get(FILTERS) or []
        exposure = self._exposure.descriptor_json(list(self.hidden()))
        descriptor = ToolsetDescriptor(
            tools=[tool.descriptor() for tool in self],
            lock=self.resources.get(LOCK_DIGEST),
            filters=list(filters),
            exposure=ExposureRecord.model_validate(exposure) if exposure is not None else None,
            policy=None if self._policy is None else self._policy.to_json(),
        )
        if self._sealed:
            self._descriptor = descriptor
        return descriptor

    async def aclose(self) -> None:
        """Run every registered clean-up; idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._exit_stack.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "sealed" if self._sealed else "open"
        return f"Toolset({len(self._tools)} tools, {len(self._quarantined)} quarantined, {state})"
