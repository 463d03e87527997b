"""``llm``: answers from evidence by an OpenAI-compatible model, every quote located in the bytes.

For every ``retrieve`` step that finished ok, its query is a question and its chunks
are the evidence; a run with no retrieve step asks the spec's task over every tool
result. Each question is one request to the model through the run's provider port
(the ``llm.chat`` tool the runtime builds from :meth:`LLMReasoner.providers`): the
request is the call's arguments and the response the call's evidence, both in the
hash chain, and frozen replay serves the recorded response (no network).

The model replies with an answer and quotes naming the evidence shown to it
(:mod:`toolproof.evidence.llm_answers`). Quotes are resolved, never trusted: each is
located in the bytes of the evidence it names (:func:`~toolproof.evidence.quotes.locate_quote`:
exact, else whitespace-insensitive, the span always on the original bytes). Resolved
quotes become the claim's supports; the claim is ``validated`` only with at least
``min_supports`` of them, not counting a quote shorter than four characters, and a
quote found only where a tool result repeats its call's own arguments is no support
(:mod:`toolproof.evidence.echoes`). Otherwise — quotes that resolve nowhere, "I don't know",
a malformed reply, a failed call — the question gets an ``insufficient_evidence``
claim whose reason names each unresolved quote and the evidence it named.

The reasoner is not deterministic (``varies = ("model",)``): two live runs may differ,
``toolproof diff`` says the model is the source, and replay refuses (naming the
field) when the model, the prompt, the parameters or the evidence sent would differ.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolproof.contract.evidence import Citation, Claim, EvidenceRecord, SupportRef
from toolproof.contract.trace import ToolCalled, TraceEvent
from toolproof.errors import InputError, validation_problem
from toolproof.evidence.echoes import is_short, quote_problem
from toolproof.evidence.llm_answers import (
    DEFAULT_SYSTEM_PROMPT,
    ParsedAnswer,
    answer_schema,
    evidence_label,
    parse_answer,
    user_prompt,
)
from toolproof.evidence.quotes import locate_quote
from toolproof.evidence.reasoners import (
    ProviderNeed,
    Reasoner,
    ReasonerRequest,
    retrieve_question,
)
from toolproof.identity import digest

__all__ = ["DEFAULT_BASE_URL", "PROVIDER_TOOL", "LLMReasoner"]

DEFAULT_BASE_URL = "http://127.0.0.1:8031/v1"
"""The endpoint when neither ``base_url`` nor a set ``base_url_env`` gives one: the local
llama.cpp server that ``.ci/services`` starts."""

PROVIDER_TOOL = "llm.chat"
"""The name of the provider tool the reasoner calls."""

_MAX_PROMPT_BYTES = 64 * 1024


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, min_length=1)
    base_url_env: str | None = Field(default=None, min_length=1)
    model: str | None = Field(default=None, min_length=1)
    model_env: str | None = Field(default=None, min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    temperature: float = Field(default=0.0, ge=0, le=2)
    seed: int | None = None
    max_tokens: int = Field(default=512, ge=1, le=32768)
    max_quotes: int = Field(default=3, ge=1, le=20)
    max_evidence_bytes: int = Field(default=12_000, ge=1, le=1_000_000)
    system_prompt_file: str | None = Field(default=None, min_length=1)
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    max_retries: int = Field(default=2, ge=0, le=10)
    steps: list[str] | None = None


def _resolved(value: str | None, env: str | None, what: str, default: str | None) -> str:
    if env:
        found = os.environ.get(env, "").strip()
        if found:
            return found
    if value:
        return value
    if default is not None:
        return default
    raise InputError(
        f"reasoner 'llm' params: {what}_env: the environment variable {env} is not set "
        f"(and no '{what}' is given)",
        reasoner="llm",
    )


def _content(response: Any) -> str:
    """``choices[0].message.content`` of a response the provider tool already checked."""
    content = response["choices"][0]["message"]["content"]
    return content if isinstance(content, str) else ""


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class LLMReasoner(Reasoner):
    """``llm``: see the module docstring.

    Params: ``base_url`` / ``base_url_env`` (default :data:`DEFAULT_BASE_URL`),
    ``model`` / ``model_env`` (one required), ``api_key_env`` (the variable's name; the
    key never enters a run), ``temperature`` (0..2, default 0), ``seed``, ``max_tokens``
    (default 512), ``max_quotes`` (1..20, default 3), ``max_evidence_bytes`` (evidence
    shown per question, default 12,000), ``system_prompt_file`` (relative to the
    working directory; its digest enters the config digest), ``response_format``
    (``json_schema``, ``json_object`` or ``none``), ``timeout_seconds`` (default 60),
    ``max_retries`` (429 retries, default 2), ``steps`` (retrieve steps to answer).
    """

    name = "llm"
    version = "1"
    deterministic = False
    varies = ("model",)

    def check_params(self, params: dict[str, Any]) -> None:
        """Check the parameters and read the system prompt file.

        Raises:
            InputError: an unknown key, a value out of range, no model, or an
                unreadable (or larger than 64 KiB) system prompt file.

        """
        if params.get("model") is None and params.get("model_env") is None:
            raise InputError(
                "reasoner 'llm' params: model: required (give 'model', or 'model_env' naming "
                "an environment variable)",
                reasoner=self.name,
            )
        try:
            self.params = _Params.model_validate(params)
        except ValidationError as exc:
            first = validation_problem(exc)
            raise InputError(
                f"reasoner 'llm' params: {first.where}: {first.message}", reasoner=self.name
            ) from None
        self.system_prompt = DEFAULT_SYSTEM_PROMPT
        if self.params.system_prompt_file is not None:
            path = Path(self.params.system_prompt_file)
            try:
                data = path.read_bytes()[: _MAX_PROMPT_BYTES + 1]
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(
                    f"reasoner 'llm' params: system_prompt_file: cannot read {str(path)!r}: "
                    f"{getattr(exc, 'strerror', None) or exc}",
                    reasoner=self.name,
                ) from None
            if len(data) > _MAX_PROMPT_BYTES:
                raise InputError(
                    f"reasoner 'llm' params: system_prompt_file: {str(path)!r} is larger "
                    f"than {_MAX_PROMPT_BYTES} bytes",
                    reasoner=self.name,
                )
            self.system_prompt = text

    def config(self) -> dict[str, Any]:
        """``min_supports``, ``params`` and the digest of the system prompt in use."""
        prompt_digest = digest(self.system_prompt.encode("utf-8"))
        return {**super().config(), "system_prompt": prompt_digest}

    def providers(self) -> tuple[ProviderNeed, ...]:
        """The ``llm.chat`` tool at the resolved base URL."""
        base_url = _resolved(
            self.params.base_url, self.params.base_url_env, "base_url", DEFAULT_BASE_URL
        )
        config = {
            "base_url": base_url,
            "api_key_env": self.params.api_key_env,
            "timeout_seconds": self.params.timeout_seconds,
            "max_retries": self.params.max_retries,
        }
        return (ProviderNeed(PROVIDER_TOOL, "openai-chat", config),)

    def request(self, question: str, texts: list[str]) -> dict[str, Any]:
        """The Chat Completions body asking ``question`` over ``texts`` (shown as E1, E2...).

        Raises:
            InputError: the model is to come from an environment variable that is unset.

        """
        model = _resolved(self.params.model, self.params.model_env, "model", None)
        body: dict[str, Any] = {
            "model": model,
            "messages": [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": user_prompt(question, texts, self.params.max_quotes)},
            ],
            "temperature": self.params.temperature,
            "max_tokens": self.params.max_tokens,
        }
        if self.params.seed is not None:
            body["seed"] = self.params.seed
        schema = answer_schema(self.params.max_quotes)
        if self.params.response_format == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema},
            }
        elif self.params.response_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    def describe_change(self, events: Iterable[TraceEvent]) -> str:
        """Name what differs from the first recorded ``llm.chat`` request: model, prompt, params."""
        recorded = next(
            (
                event.call.arguments
                for event in events
                if isinstance(event, ToolCalled) and event.call.tool == PROVIDER_TOOL
            ),
            None,
        )
        if recorded is None:
            return "the configuration digest differs (no recorded model request to compare)"
        try:
            now = self.request("", [])
        except InputError as exc:
            return exc.message
        changes = []
        for key in ("model", "temperature", "seed", "max_tokens", "response_format"):
            if recorded.get(key) != now.get(key):
                changes.append(f"/{key}: recorded {recorded.get(key)!r}, now {now.get(key)!r}")
        messages = recorded.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else {}
        then = first.get("content") if isinstance(first, dict) else None
        if then != self.system_prompt:
            then_digest = digest(then.encode("utf-8")) if isinstance(then, str) else "none"
            changes.append(
                f"/messages/0/content (system prompt): recorded {then_digest}, "
                f"now {digest(self.system_prompt.encode('utf-8'))}"
            )
        return "; ".join(changes) or "the parameters differ (max_quotes, steps or min_supports)"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """Ask the model each question; see the module docstring."""
        questions: list[tuple[str, list[EvidenceRecord]]] = []
        for step, output in request.outputs.items():
            if self.params.steps is not None and step not in self.params.steps:
                continue
            question = retrieve_question(output)
            if question is not None:
                chunks = [r for r in output.evidence if r.source.kind == "chunk"]
                questions.append((question, chunks))
        if not questions and self.params.steps is None:
            results = [r for r in request.evidence if r.source.kind == "tool_result"]
            if results:
                questions.append((request.task, results))
        return [await self._answer(q, records, request) for q, records in questions]

    def _shown(
        self, records: list[EvidenceRecord], request: ReasonerRequest
    ) -> list[tuple[EvidenceRecord, bytes]]:
        shown: list[tuple[EvidenceRecord, bytes]] = []
        budget = self.params.max_evidence_bytes
        for record in records:
            data = request.store.read(record.id)
            if len(data) > budget:
                break
            budget -= len(data)
            shown.append((record, data))
        return shown

    async def _answer(
        self, question: str, records: list[EvidenceRecord], request: ReasonerRequest
    ) -> Claim:
        shown = self._shown(records, request)
        if not shown:
            return self.insufficient(question, "no evidence fits max_evidence_bytes; not asked")
        texts = [data.decode("utf-8", "replace") for _, data in shown]
        result, evidence = await request.call_tool(PROVIDER_TOOL, self.request(question, texts))
        if result.failure is not None or evidence is None:
            failure = result.failure
            why = f"{failure.kind}: {failure.message}" if failure is not None else "no evidence"
            return self.insufficient(question, f"the model call failed ({why}); nothing asserted")
        content = _content(result.value)
        parsed = parse_answer(content)
        if parsed is None:
            return self.insufficient(
                question,
                f"the model's reply is not the JSON answer asked for: {_short(content)!r}",
            )
        return self._claim(question, parsed, shown, request)

    def _claim(
        self,
        question: str,
        parsed: ParsedAnswer,
        shown: list[tuple[EvidenceRecord, bytes]],
        request: ReasonerRequest,
    ) -> Claim:
        if parsed.answer is None:
            return self.insufficient(question, "the model said the evidence does not answer it")
        by_label = {evidence_label(i): pair for i, pair in enumerate(shown)}
        supports: list[SupportRef] = []
        citations: list[Citation] = []
        unresolved: list[str] = []
        spans: set[tuple[str, int, int]] = set()
        counted = 0
        quotes = parsed.quotes[: self.params.max_quotes]
        for quote in quotes:
            pair = by_label.get(quote.label)
            if pair is None:
                unresolved.append(f"{_short(quote.text)!r} names {quote.label!r}, not shown")
                continue
            record, data = pair
            match = locate_quote(data, quote.text)
            if match is None:
                unresolved.append(f"{_short(quote.text)!r} is not in {quote.label} ({record.id})")
                continue
            if (record.id, match.start, match.end) in spans:
                continue
            original = data[match.start : match.end].decode("utf-8")
            output = request.outputs.get(record.source.step)
            problem = quote_problem(original, output.arguments if output is not None else None)
            if problem is not None and not is_short(original):  # an echo supports nothing
                unresolved.append(f"{_short(quote.text)!r} in {quote.label}: {problem}")
                continue
            if problem is not None:  # short: cited, but it does not count
                unresolved.append(f"{_short(quote.text)!r} in {quote.label}: {problem}")
            else:
                counted += 1
            spans.add((record.id, match.start, match.end))
            citations.append(Citation(support=len(supports), text=original))
            supports.append(request.store.support(record.id, match.start, match.end))
        tally = f"{counted} of {len(quotes)} quotes resolved"
        detail = f"; unresolved: {'; '.join(unresolved)}" if unresolved else ""
        if counted < request.min_supports:
            return self.insufficient(
                question,
                f"the model answered {_short(parsed.answer)!r} but {tally}, fewer than "
                f"min_supports = {request.min_supports}{detail}",
            )
        return self.validated(
            parsed.answer,
            supports,
            citations,
            confidence=round(counted / max(len(quotes), 1), 6),
            reason=f"answers {question!r}; {tally}{detail}",
        )
