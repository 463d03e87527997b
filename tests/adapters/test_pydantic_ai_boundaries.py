"""RecordedModel.request without pydantic-ai's boundary wrappers, which do nothing for a wrapper."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pydantic_ai.models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof import Tool, Toolset
from toolproof.adapters import pydantic_ai_model
from toolproof.adapters.pydantic_ai_model import RecordedModel


def _toolset() -> Toolset:
    def echo(text: str) -> str:
        """Echo."""
        return text

    toolset = Toolset()
    toolset.add(Tool.from_function(echo))
    return toolset.seal()


def test_the_recorded_request_is_its_own_function_and_the_wrapped_models_keep_theirs() -> None:
    assert not hasattr(RecordedModel.request, "__wrapped__")
    assert RecordedModel.request.__code__.co_qualname == "RecordedModel.request"
    wrapped = FunctionModel.request  # every answering model keeps pydantic-ai's boundaries
    chain = []
    while hasattr(wrapped, "__wrapped__"):
        chain.append(wrapped.__code__.co_qualname)
        wrapped = wrapped.__wrapped__
    assert set(chain) == pydantic_ai_model._NO_OP_BOUNDARIES
    assert wrapped.__code__.co_qualname == "FunctionModel.request"


def test_the_wrapped_model_answers_inside_its_own_download_budget(tmp_path: Path) -> None:
    budgets: list[Any] = []

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        budgets.append(pydantic_ai.models._request_download_budget.get())
        return ModelResponse(parts=[TextPart("It is a pear.")])

    async def go() -> ModelResponse:
        async with toolproof.record_session(_toolset(), root=tmp_path, task="t") as session:
            model = RecordedModel(FunctionModel(respond), session)
            assert model._restores_special_tokens is False  # a WrapperModel restores nothing
            messages: list[ModelMessage] = [ModelRequest.user_text_prompt("Which fruit?")]
            return await model.request(messages, None, ModelRequestParameters())

    response = asyncio.run(go())
    assert [part.content for part in response.parts if isinstance(part, TextPart)] == [
        "It is a pear."
    ]
    assert len(budgets) == 1 and budgets[0] is not None
    assert budgets[0].remaining == pydantic_ai.models._MAX_REQUEST_FILE_URL_DOWNLOAD_BYTES
    assert pydantic_ai.models._request_download_budget.get() is None


def test_a_chain_holding_any_other_wrapper_is_kept_whole() -> None:
    async def request(self: Any) -> None:
        """The model's own request."""

    @functools.wraps(request)
    async def other(self: Any) -> None:
        await request(self)

    assert pydantic_ai_model._unwrapped(other) is other
    assert pydantic_ai_model._unwrapped(request) is request
    budgeted = pydantic_ai.models._within_request_download_budget(request)
    assert pydantic_ai_model._unwrapped(budgeted) is request
    assert pydantic_ai_model._unwrapped(functools.wraps(budgeted)(other)) is not request
