"""A pydantic-ai agent answers a question about a git repository through mcp-server-git.

The agent's run is recorded with ``toolproof.record_session`` (every tool call, with
its exact result bytes, and every model turn, request and response, in a hash-chained
run directory), verified (the answer's
citations are looked up byte for byte in the results of the calls they name), and
replayed offline with ``toolproof.replay_session`` (the same agent code, every tool
result and model response served from the recording: no tool body runs, no model is
asked). The model is shown read-only git tools only: ``toolproof.toml``'s ``include``
filter binds no tool that writes, and :func:`read_only_tools` refuses to hand the model
a tool that does not declare ``readOnlyHint``.

    python examples/agent-pydantic-ai/agent.py                 # a scripted model (offline)
    python examples/agent-pydantic-ai/agent.py \\
        --base-url http://127.0.0.1:8031/v1 --model smollm2    # any OpenAI-compatible endpoint

See README.md beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

import toolproof

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "toolproof.toml"
REPO = "../.."
"""The repository as the tools see it (mcp-server-git runs in this folder)."""
QUESTION = "Who made the latest commit of this repository, and why?"
INSTRUCTIONS = (
    f"You answer questions about the git repository at repo_path {REPO!r} with its git "
    "tools. Call git_log with max_count 1 first, then git_show with the commit it names. "
    "Answer in two sentences. Quote tool results word for word in double quotes, each "
    "followed by the id of the tool call that returned it in square brackets, like "
    '"the exact words" [id].'
)
SETTINGS = ModelSettings(temperature=0.0, seed=0, max_tokens=256)
LIMITS = UsageLimits(request_limit=6)

Agent_ = Callable[[toolproof.Session], Coroutine[Any, Any, None]]


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool results the model has been shown, in the order it received them."""
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def _line(text: str, prefix: str) -> str | None:
    """The first line of ``text`` that starts with ``prefix``, as it is there."""
    match = re.search(rf"^{re.escape(prefix)}[^\n]*", text, re.MULTILINE)
    return match.group(0) if match else None


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model: git_log, then git_show of the commit it names, then the answer."""
    returns = _returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart("git_log", {"repo_path": REPO, "max_count": 1})])
    log = str(returns[0].content)
    commit = re.search(r"^Commit: ([0-9a-f]{40})$", log, re.MULTILINE)
    if commit is None:
        return ModelResponse(parts=[TextPart("git_log named no commit.")])
    if len(returns) == 1:
        call = {"repo_path": REPO, "revision": commit.group(1)}
        return ModelResponse(parts=[ToolCallPart("git_show", call)])
    author = _line(log, "Author: ") or "Author: ?"
    message = _line(log, "Message: ") or "Message: ?"
    changed = re.findall(r"^\+\+\+ b/([^\n]+)$", str(returns[1].content), re.MULTILINE)
    files = ", ".join(changed) or "no file"
    cited = returns[0].tool_call_id  # the id of the git_log call, as the model saw it
    return ModelResponse(
        parts=[
            TextPart(
                f"The latest commit, {commit.group(1)}, was made by "
                f'"{author}" [{cited}], and its message says why: "{message}" [{cited}]. '
                f"It changed {files}."
            )
        ]
    )


def citations_of(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """What the answer rests on: each git_log result's author and message lines.

    Each citation names the recorded call by tool and occurrence (calls are numbered
    in the order they were asked; this agent makes them one at a time, so that is the
    order the model was shown their results) and quotes the line exactly as the tool
    returned it; ``verify`` looks the quote up byte for
    byte in that call's stored result.
    """
    citations: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for part in _returns(messages):
        seen[part.tool_name] = seen.get(part.tool_name, 0) + 1
        if part.tool_name != "git_log":
            continue
        for prefix in ("Author: ", "Message: "):
            quote = _line(str(part.content), prefix)
            if quote is not None:
                occurrence = seen[part.tool_name]
                citations.append({"tool": "git_log", "occurrence": occurrence, "quote": quote})
    return citations


def read_only_tools(session: toolproof.Session) -> list[str]:
    """The names of the tools the model is shown, each checked to declare ``readOnlyHint``.

    ``toolproof.toml``'s ``include`` filter binds only the server's read-only tools;
    this check keeps it so if the filter is edited or a tool changes its annotations.

    Raises:
        SystemExit: a tool the session would hand the model does not declare
            ``readOnlyHint`` (the message names it); nothing was asked of the model.

    """
    specs = session.tool_specs()
    writing = [spec.name for spec in specs if not spec.annotations.is_read_only]
    if writing:
        raise SystemExit(
            f"refusing to show a live model tools that may write: {', '.join(writing)} "
            "(each tool must declare readOnlyHint: see toolproof.toml's include filter)"
        )
    return sorted(spec.name for spec in specs)


def make_agent(model: Model) -> Agent_:
    """The agent code, run live and frozen alike: ``async (Session) -> None``."""

    async def agent(session: toolproof.Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(model),  # each model turn recorded (frozen: served)
            toolsets=[session.pydantic_ai_toolset()],
            instructions=INSTRUCTIONS,
        )
        with capture_run_messages() as messages:
            try:
                result = await runner.run(QUESTION, model_settings=SETTINGS, usage_limits=LIMITS)
                output = result.output
            except AgentRunError as exc:  # a small model may not finish; the run still records
                output = f"(the model gave no answer: {type(exc).__name__}: {exc})"
        session.answer(output, citations=citations_of(messages))

    return agent


def model_of(base_url: str | None, name: str | None, api_key_env: str) -> tuple[Model, str]:
    """The model and how to describe it: scripted unless an endpoint is given."""
    if base_url is None:
        return SCRIPTED, (
            "scripted (a pydantic-ai FunctionModel: git_log, git_show, then an answer "
            "quoting them; no LLM is called; give --base-url and --model for one)"
        )
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key = os.environ.get(api_key_env) or "not-needed"
    provider = OpenAIProvider(base_url=base_url, api_key=key)
    model_name = name or "smollm2"
    return OpenAIChatModel(model_name, provider=provider), f"{model_name} at {base_url}"


SCRIPTED = FunctionModel(script, model_name="scripted")
"""The default model: no LLM, the answer :func:`script` writes."""

agent = make_agent(SCRIPTED)
"""The agent with the scripted model, for ``toolproof replay RUN --agent agent:agent``
(from this folder; ``--config toolproof.toml`` also checks the tools did not change)."""


def _replayed(replay: toolproof.AgentReplay) -> dict[str, Any]:
    return {
        "identical": replay.identical,
        "calls": replay.calls,
        "turns": replay.turns,
        "live_calls": replay.live_calls,
    }


async def main(args: argparse.Namespace, agent: Agent_) -> dict[str, Any]:
    """Record, verify and replay (or, with ``--replay RUN``, only replay); a summary."""
    if args.replay is not None:
        recorded = Path(args.replay)
        if not recorded.is_dir():  # a run id, as `recorded ...` prints it: under ROOT/runs
            recorded = Path(args.root) / "runs" / args.replay
        replay = await toolproof.replay_session(recorded, agent)  # the run alone
        return {"run_id": recorded.name, "replay": _replayed(replay)}
    root = Path(args.root).resolve()
    async with toolproof.record_session(CONFIG, root=root, task=QUESTION) as session:
        tools = read_only_tools(session)
        print(
            f"tools: {', '.join(tools)} (read-only: toolproof.toml's include filter binds "
            "no git tool that writes)",
            file=sys.stderr if args.json else sys.stdout,
        )
        await agent(session)
    run = root / "runs" / str(session.run_id)
    claim = json.loads((run / "claims.json").read_bytes())[0]
    verification = toolproof.verify_run(run)
    # frozen: no tool body runs and no model is asked; the run stores the tools as the
    # model was shown them, so no Toolset (and no server) is needed
    replay = await toolproof.replay_session(run, agent)
    return {
        "run_id": session.run_id,
        "tools": tools,
        "run": str(run),
        "answer": (session.answered or {}).get("answer"),
        "claim": {"status": claim["status"], "citations": [c["text"] for c in claim["citations"]]},
        "verified": verification.ok,
        "failures": [str(failure) for failure in verification.failures],
        "replay": _replayed(replay),
    }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _print(outcome: dict[str, Any]) -> None:
    if "answer" in outcome:
        print(f"answer: {outcome['answer']}")
        print(f"recorded {outcome['run']} ({_count(outcome['replay']['calls'], 'tool call')})")
        claim = outcome["claim"]
        print(f"claim: {claim['status']}, citing {claim['citations']}")
        print("verify: " + ("ok" if outcome["verified"] else f"FAILED {outcome['failures']}"))
    replay = outcome["replay"]
    print(
        f"replay: {'identical' if replay['identical'] else 'DIFFERS'}, "
        f"{_count(replay['calls'], 'tool call')} and {_count(replay['turns'], 'model turn')} "
        f"served from the recording, {replay['live_calls']} live calls"
    )


def cli(argv: list[str] | None = None) -> int:
    """Parse the arguments, run, print the outcome; exit 0 when it verifies and replays."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", default=str(HERE / ".toolproof"), help="artifact root")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: scripted)")
    parser.add_argument("--model", help="the endpoint's model name (default: smollm2)")
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="the variable holding the API key"
    )
    parser.add_argument(
        "--replay",
        metavar="RUN",
        help="only replay this recorded run (a directory, or a run id in ROOT/runs)",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = parser.parse_args(argv)
    model, described = model_of(args.base_url, args.model, args.api_key_env)
    print(f"model: {described}", file=sys.stderr if args.json else sys.stdout)
    outcome = asyncio.run(main(args, make_agent(model)))
    outcome["model"] = described
    if args.json:
        print(json.dumps(outcome, indent=2))
    else:
        _print(outcome)
    ok = outcome.get("verified", True) and outcome["replay"]["identical"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(cli())
