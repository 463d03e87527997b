"""A Toolset with one gated tool, for the exposure tests of every face.

``delete_branch`` has combos ``[approve]``, ``[timeout]`` and ``[timeout, approve]``; the
layer named ``approve`` comes from a private registry here (a pass-through: the
exposure rule reads only the layer chain), so these tests do not depend on what the
approval wrapper asks. ``list_branches`` has no gate anywhere.
"""

from __future__ import annotations

from typing import Any

from toolproof import ExtensionKind, Tool, Toolset
from toolproof.extensions.apply import ComboElement, apply_combos
from toolproof.extensions.builtins import BUILTINS
from toolproof.extensions.registry import Extension, ExtensionRegistry
from toolproof.tools.exposure import Exposure

EVERY = [
    "delete_branch",
    "delete_branch_approve",
    "delete_branch_timeout",
    "delete_branch_timeout_approve",
    "list_branches",
]
"""Every tool and variant the Toolset holds, sorted."""
EXPOSED = ["delete_branch_approve", "delete_branch_timeout_approve", "list_branches"]
HIDDEN = ["delete_branch", "delete_branch_timeout"]


def _pass_through(inner: Tool, *, name: str, config: Any) -> Tool:
    return Tool(inner.spec.model_copy(update={"name": name}), inner.call)


def registry() -> ExtensionRegistry:
    """The built-ins, with a pass-through wrapper in place of the built-in ``approve``."""
    out = ExtensionRegistry(builtins=False)
    for ext in BUILTINS:
        if ext.name != "approve":
            out.register(ext)
    out.register(Extension(name="approve", kind=ExtensionKind.WRAPPER, factory=_pass_through))
    return out


def gated_toolset(bodies: list[str], exposure: Exposure | None = None) -> Toolset:
    """The sealed Toolset; each body run appends ``"<tool>:<branch>"`` to ``bodies``."""

    async def delete_branch(branch: str) -> str:
        """Delete a branch."""
        bodies.append(f"delete_branch:{branch}")
        return f"deleted {branch}"

    async def list_branches() -> list[str]:
        """List the branches."""
        bodies.append("list_branches:")
        return ["main"]

    toolset = Toolset()
    toolset.add(Tool.from_function(delete_branch), owner="python:test")
    toolset.add(Tool.from_function(list_branches), owner="python:test")
    timeout = ComboElement("timeout", {"seconds": 30})
    combos = [[ComboElement("approve")], [timeout], [timeout, ComboElement("approve")]]
    apply_combos(toolset, "delete_branch", combos, registry=registry())
    if exposure is not None:
        toolset.set_exposure(exposure)
    return toolset.seal()


def arguments_of(name: str) -> dict[str, Any]:
    """Valid arguments for tool ``name`` of :func:`gated_toolset`."""
    return {} if name == "list_branches" else {"branch": "feature"}
