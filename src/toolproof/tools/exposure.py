"""What the outward faces expose of a Toolset: no path around an approval gate.

A variant is **gated** when its layer chain (:attr:`Tool.stack`) holds the ``approve``
wrapper (:data:`GATE_EXTENSION`). When any variant of a base tool is gated, the base
itself and every other variant of it without the gate are **hidden**: ``toolproof
serve`` (MCP) does not list or call them, the session adapters do not hand them to an
agent, and a run spec (``toolproof run``, ``serve-api``) that calls one is refused
before anything runs. The Toolset still holds them (a gated variant calls its inner
tool directly, and a worker process looks inner variants up by name).

``[serve]`` in ``toolproof.toml`` changes that with tool-name globs
(:func:`fnmatch.fnmatchcase`: ``*``, ``?``, ``[...]``, case sensitive)::

    [serve]
    expose = ["delete_branch_dry_run"]   # shown although a sibling is gated
    hide = ["debug_*"]                   # never shown, gated or not

A gated variant the config asks for that did not bind (quarantined, or withdrawn by
the lock) still hides its base's ungated tools: fail closed.

``hide`` wins over ``expose``; ``expose`` only lifts the gate rule. A glob that matches
no tool name is refused, so a misspelt ``hide`` never leaves a tool exposed. The
policy and the names it hides are part of the Toolset descriptor (``exposure``), so
changing either changes run ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from toolproof.tools.tool import Tool

__all__ = ["GATE_EXTENSION", "Exposure", "is_gated"]

GATE_EXTENSION = "approve"
"""The extension whose presence in a variant's layer chain makes the variant gated."""


def is_gated(tool: Tool) -> bool:
    """Whether ``tool``'s layer chain holds the approval wrapper (:data:`GATE_EXTENSION`)."""
    return any(layer.name == GATE_EXTENSION for layer in tool.stack)


@dataclass(frozen=True)
class Exposure:
    """The exposure policy of a Toolset (``[serve] expose`` / ``hide``).

    Attributes:
        expose: globs naming tools shown although a variant of their base is gated.
        hide: globs naming tools never shown (wins over ``expose``).

    """

    expose: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()

    def unmatched(self, names: Iterable[str]) -> list[tuple[str, int, str]]:
        """The globs that match none of ``names``, as ``(key, index, glob)``.

        Args:
            names: every tool name the Toolset holds or quarantined.

        Returns:
            ``[("hide", 0, "debug_*"), ...]``, in ``expose`` then ``hide`` order.

        """
        known = list(names)
        return [
            (key, index, glob)
            for key, globs in (("expose", self.expose), ("hide", self.hide))
            for index, glob in enumerate(globs)
            if not any(fnmatchcase(name, glob) for name in known)
        ]

    def hidden(
        self, tools: Iterable[Tool], refused: Mapping[str, Sequence[str]] | None = None
    ) -> dict[str, str]:
        """The tools this policy hides, each with the reason.

        Args:
            tools: every tool and variant of the Toolset.
            refused: base tool name -> the gated variants configured for it that did not
                bind (quarantined, or withdrawn by the lock). A gate that failed to bind
                still hides its base's ungated tools: fail closed, never a path around a
                gate the config asked for.

        Returns:
            ``{name: reason}`` sorted by name; a reason reads ``ungated: delete_branch_approve
            gates delete_branch (name it in [serve] expose to show it)`` or ``[serve] hide
            'debug_*'``.

        """
        every = list(tools)
        gates: dict[str, list[str]] = {}
        for base, names in (refused or {}).items():
            gates.setdefault(base, []).extend(f"{name} (quarantined)" for name in names)
        for tool in every:
            if is_gated(tool):
                gates.setdefault(tool.base or tool.name, []).append(tool.name)
        out: dict[str, str] = {}
        for tool in sorted(every, key=lambda t: t.name):
            hide = next((g for g in self.hide if fnmatchcase(tool.name, g)), None)
            if hide is not None:
                out[tool.name] = f"[serve] hide {hide!r}"
                continue
            base = tool.base or tool.name
            if base not in gates or is_gated(tool):
                continue
            if any(fnmatchcase(tool.name, glob) for glob in self.expose):
                continue
            gate = ", ".join(sorted(gates[base]))
            out[tool.name] = f"ungated: {gate} gates {base} (name it in [serve] expose to show it)"
        return out

    def descriptor_json(self, hidden: Sequence[str]) -> dict[str, Any] | None:
        """``{"expose", "hide", "hidden"}`` as the Toolset descriptor records it.

        Returns:
            ``None`` when the policy is empty and hides nothing (the descriptor, and run
            ids, stay what they were without approvals).

        """
        if not (self.expose or self.hide or hidden):
            return None
        return {"expose": list(self.expose), "hide": list(self.hide), "hidden": sorted(hidden)}
