"""The providers a reasoner reaches through its port: built, identified, routed.

A reasoner declares what it needs (:class:`~toolproof.evidence.reasoners.ProviderNeed`);
:func:`build_providers` turns each need into a tool (an ``openai-chat`` need into
:func:`~toolproof.sources.chat_provider.chat_provider_tool`), :func:`provider_descriptors`
gives each one's identity for ``runtime.json`` (kind ``model``: its calls are a declared
source of variation), and :class:`ProviderCalls` routes a call of a provider's name to
its tool and every other call to the run's own port. Frozen replay needs none of
this: recorded results are served by call id whatever the tool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolproof.contract.runs import MODEL_PROVIDER_KIND, PluginDescriptor
from toolproof.contract.tools import ToolCall
from toolproof.errors import InputError
from toolproof.evidence.reasoners import ProviderNeed
from toolproof.identity import digest_json
from toolproof.runs.calls import CallPort, LiveCalls
from toolproof.sources.chat_provider import chat_provider_tool
from toolproof.tools.observe import Observed
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = ["ProviderCalls", "build_providers", "provider_descriptors"]

_KINDS = ("openai-chat",)


def _checked(needs: Sequence[ProviderNeed], taken: Sequence[str]) -> None:
    seen: set[str] = set()
    for need in needs:
        if need.kind not in _KINDS:
            raise InputError(
                f"reasoner provider {need.name!r}: unknown kind {need.kind!r} "
                f"(known: {', '.join(_KINDS)})"
            )
        if need.name in taken or need.name in seen:
            raise InputError(
                f"reasoner provider {need.name!r}: the name is already a tool of the Toolset "
                "(rule: a provider's name is its own)",
                tool=need.name,
            )
        seen.add(need.name)


def build_providers(needs: Sequence[ProviderNeed], taken: Sequence[str] = ()) -> dict[str, Tool]:
    """Build a tool for each need, by name.

    Args:
        needs: the reasoner's :meth:`~toolproof.evidence.reasoners.Reasoner.providers`.
        taken: the Toolset's tool names (a provider may not reuse one).

    Returns:
        ``{name: tool}``.

    Raises:
        InputError: an unknown kind, or a name already taken.

    """
    _checked(needs, taken)
    tools: dict[str, Tool] = {}
    for need in needs:
        config: Mapping[str, Any] = need.config
        tools[need.name] = chat_provider_tool(
            name=need.name,
            base_url=str(config["base_url"]),
            api_key_env=config.get("api_key_env"),
            timeout_seconds=float(config.get("timeout_seconds", 60.0)),
            max_retries=int(config.get("max_retries", 2)),
        )
    return tools


def provider_descriptors(needs: Sequence[ProviderNeed]) -> list[PluginDescriptor]:
    """The identity of each provider for ``runtime.providers`` (kind ``model``).

    The config digest covers the kind and the settings (the API key variable's name,
    never its value).
    """
    return [
        PluginDescriptor(
            kind=MODEL_PROVIDER_KIND,
            name=need.name,
            version="1",
            config_digest=digest_json({"kind": need.kind, **dict(need.config)}),
        )
        for need in needs
    ]


class ProviderCalls:
    """A call port that answers provider calls itself and passes the rest to ``inner``.

    Provider calls go through a :class:`~toolproof.runs.calls.LiveCalls` over a Toolset
    of the provider tools, so they get the same wall-clock cancellation and the same
    observed-failure reporting as every tool call.

    Args:
        inner: the run's port (its Toolset, or a runtime plugin's).
        providers: the provider tools by name (:func:`build_providers`).

    """

    def __init__(self, inner: CallPort, providers: Mapping[str, Tool]) -> None:
        self.inner = inner
        self.mode = inner.mode
        toolset = Toolset()
        for tool in providers.values():
            toolset.add(tool)
        self._providers = LiveCalls(toolset.seal())
        self._names = frozenset(providers)

    @property
    def live_calls(self) -> int:
        """Live calls made, the inner port's and the providers'."""
        return int(getattr(self.inner, "live_calls", 0)) + self._providers.live_calls

    async def call(self, call: ToolCall, timeout: float | None) -> Observed:
        """Call the provider ``call.tool`` names, or pass the call to the inner port."""
        if call.tool in self._names:
            return await self._providers.call(call, timeout)
        return await self.inner.call(call, timeout)
