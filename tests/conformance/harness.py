"""The project's runner of the declared-tool binding cases (``cases/binding.json``).

The checks are those of the suite's own ``runner.py`` (``shared/cases/binding/``):

* the bind outcome: ``"bind"`` is ``"accept"`` (the default), ``"reject"`` (bind raises,
  the message holds every ``reason_contains`` word, case-insensitively) or
  ``"reject_or_accept_fast"`` (either, within ``max_seconds``; a refusal holds one of
  ``reason_contains_any``);
* per probe: accept or reject as expected; ``invoke`` is called exactly once on accept
  and never on reject; what it received is plain JSON and equals ``delivered`` under
  strict JSON equality (``true`` is not ``1``, ``1`` equals ``1.0``, keys match exactly);
  the callable returns ``invoke``'s result;
* the declaration handed to ``bind`` is not mutated; bind and probes together take at
  most ``max_seconds`` when the case sets it.

:func:`run_case` returns the failures of one case (empty when it passes), so a test
can assert ``== []`` and show every failing probe.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases" / "binding.json"

Invoke = Callable[[dict[str, Any]], Awaitable[Any]]
Bind = Callable[[dict[str, Any], Invoke], Callable[[dict[str, Any]], Awaitable[Any]]]


def load_cases() -> list[dict[str, Any]]:
    """The cases of ``cases/binding.json``, in file order."""
    cases: list[dict[str, Any]] = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    return cases


def load_adapter(name: str) -> Bind:
    """The ``bind`` of the adapter file ``tests/conformance/<name>``."""
    path = HERE / name
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # langchain_adapter imports binding_adapter
    spec = importlib.util.spec_from_file_location(f"binding_conformance_{path.stem}", path)
    assert spec is not None and spec.loader is not None, path
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bind: Bind = module.bind
    return bind


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def plain_json_problem(value: Any) -> str | None:
    """The first value that is not plain JSON (dict/list/str/int/float/bool/None), or None."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    return f"{path}: key {key!r} is {type(key).__name__}, not str"
                stack.append((child, f"{path}.{key}"))
        elif kind is list:
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
        elif kind in (str, int, float, bool, type(None)):
            if kind is float and not math.isfinite(item):
                return f"{path}: non-finite float {item!r}"
        else:
            return f"{path}: {kind.__module__}.{kind.__qualname__} is not a plain JSON value"
    return None


def _scalar_problem(got: Any, want: Any, path: str) -> str | None:
    if isinstance(want, bool) or isinstance(got, bool):
        same = type(got) is bool and type(want) is bool and got == want
    elif isinstance(want, int | float):
        same = isinstance(got, int | float) and got == want
    elif want is None:
        same = got is None
    else:
        same = isinstance(got, str) and got == want
    return None if same else f"{path}: got {got!r:.80}, expected {want!r:.80}"


def json_equal_problem(got: Any, want: Any, limit: int = 4) -> str | None:
    """Up to ``limit`` differences under strict JSON equality, joined by ``'; '``, or None."""
    problems: list[str] = []
    stack: list[tuple[Any, Any, str]] = [(got, want, "$")]
    while stack and len(problems) < limit:
        g, w, path = stack.pop()
        if isinstance(w, list):
            if not isinstance(g, list):
                problems.append(f"{path}: got {type(g).__name__} {g!r:.60}, expected list")
            elif len(g) != len(w):
                problems.append(f"{path}: got {len(g)} items, expected {len(w)}")
            else:
                pairs = [
                    (gi, wi, f"{path}[{i}]") for i, (gi, wi) in enumerate(zip(g, w, strict=True))
                ]
                stack.extend(reversed(pairs))
        elif isinstance(w, dict):
            if not isinstance(g, dict):
                problems.append(f"{path}: got {type(g).__name__} {g!r:.60}, expected object")
                continue
            missing = [k for k in w if k not in g]
            extra = [k for k in g if k not in w]
            if missing:
                problems.append(f"{path}: missing keys {missing}")
            if extra:
                problems.append(f"{path}: unexpected keys {extra}")
            stack.extend(reversed([(g[k], w[k], f"{path}.{k}") for k in w if k in g]))
        elif (problem := _scalar_problem(g, w, path)) is not None:
            problems.append(problem)
    return "; ".join(problems) if problems else None


def _missing_words(message: str, words: Iterable[str]) -> list[str]:
    low = message.casefold()
    return [word for word in words if word.casefold() not in low]


def _bind_refusal(case: dict[str, Any], error: BaseException, seconds: float) -> list[str]:
    """The failures of a case whose bind raised ``error`` after ``seconds``."""
    message = _described(error)
    mode = case.get("bind", "accept")
    limit = case.get("max_seconds")
    if mode == "reject":
        missing = _missing_words(message, case.get("reason_contains", []))
        if missing:
            return [f"bind refused, but the error does not mention {missing}: {_short(message)}"]
        if limit is not None and seconds > limit:
            return [f"bind refused after {seconds:.2f}s > {limit}s"]
        return []
    if mode == "reject_or_accept_fast":
        if seconds > limit:
            return [f"bind refused after {seconds:.2f}s > {limit}s: {_short(message)}"]
        words = case.get("reason_contains_any") or []
        if words and len(_missing_words(message, words)) == len(words):
            return [f"bind refused fast but not with a size/depth error: {_short(message)}"]
        return []
    return [f"bind raised {_short(message)}"]


def _probe_failures(
    probe: dict[str, Any], label: str, error: BaseException | None, calls: list[Any], result: Any
) -> list[str]:
    if probe["expect"] == "reject":
        if error is None:
            return [f"{label}: accepted, expected reject (delivered {calls[:1]!r:.120})"]
        if calls:
            return [f"{label}: rejected, but invoke was called first"]
        missing = _missing_words(_described(error), probe.get("reason_contains", []))
        if missing:
            return [f"{label}: rejected, but the error does not mention {missing}"]
        return []
    if error is not None:
        return [f"{label}: rejected, expected accept: {_short(_described(error))}"]
    if len(calls) != 1:
        return [f"{label}: invoke called {len(calls)} times, expected once"]
    problem = plain_json_problem(calls[0])
    if problem:
        return [f"{label}: delivered a non-JSON value: {problem}"]
    if "delivered" in probe and (diff := json_equal_problem(calls[0], probe["delivered"])):
        return [f"{label}: delivered differs: {diff}"]
    return [] if result == f"ok:{label}" else [f"{label}: callable returned {result!r:.120}"]


def run_case(bind: Bind, case: dict[str, Any]) -> list[str]:
    """Run one case through ``bind``; every failure found, or ``[]`` when it passes."""
    declaration = json.loads(json.dumps(case["declaration"]))
    fingerprint = _canonical(case["declaration"])
    calls: list[Any] | None = None
    sentinel = ""

    async def invoke(arguments: dict[str, Any]) -> str:
        if calls is None:
            raise RuntimeError("invoke called outside a probe (during bind?)")
        plain = plain_json_problem(arguments) is None
        calls.append(json.loads(json.dumps(arguments)) if plain else arguments)
        return sentinel

    started = time.monotonic()
    try:
        fn = bind(declaration, invoke)
    except Exception as error:
        return _bind_refusal(case, error, time.monotonic() - started)
    if case.get("bind", "accept") == "reject":
        return ["bind accepted a declaration that must be refused"]
    if not callable(fn):
        return [f"bind returned a non-callable {type(fn).__name__}"]
    failures: list[str] = []

    async def probes() -> None:
        nonlocal calls, sentinel
        for index, probe in enumerate(case["probes"]):
            label = f"probe {index} {_short(_canonical(probe['arguments']), 120)}"
            calls, sentinel = [], f"ok:{label}"
            error: BaseException | None = None
            result: Any = None
            try:
                awaitable = fn(json.loads(json.dumps(probe["arguments"])))
                assert inspect.isawaitable(awaitable), f"{label}: not an awaitable"
                result = await awaitable
            except Exception as exc:
                error = exc
            received, calls = calls, None
            failures.extend(_probe_failures(probe, label, error, received, result))

    asyncio.run(probes())
    seconds = time.monotonic() - started
    if _canonical(declaration) != fingerprint:
        failures.append("the adapter mutated the declaration it was given")
    limit = case.get("max_seconds")
    if limit is not None and seconds > limit:
        failures.append(f"bind + probes took {seconds:.2f}s > {limit}s")
    return failures
