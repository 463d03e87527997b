"""``toolproof serve`` under load: concurrent MCP tool calls over streamable HTTP.

One command: ``python benchmarks/bench_serve.py [--calls 200] [--rounds 3] [--sessions 10]``.

Two servers run as subprocesses on 127.0.0.1, each serving a trivial tool
``add(a, b) -> a + b`` over MCP streamable HTTP with the official ``mcp`` SDK:

* ``toolproof``: ``toolproof serve --config tests/fixtures/serve/toolproof.toml --http``
  (the served Toolset: validation, the full call path, structured content);
* ``anchor``: a bare low-level ``mcp`` SDK ``Server`` with a hand-written ``add``
  handler on the same transport (this script with ``--bare-server PORT``).

Each round opens ``--sessions`` client sessions and fires ``--calls`` tool calls at
once, spread over them (200 in flight by default); every call's latency is
measured from send to answer. Rounds alternate between the two servers. Printed:
errors (the target is 0), median and p99 latency per server, and the ratio of the
toolproof median to the anchor's. The script exits 1 if any call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests" / "fixtures" / "serve" / "toolproof.toml"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bare_server(port: int) -> None:
    import mcp_types as types
    import uvicorn
    from mcp.server.lowlevel import Server

    tool = types.Tool(
        name="add",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a"],
        },
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        value = args["a"] + args.get("b", 1)
        return types.CallToolResult(
            content=[types.TextContent(text=str(value))], structured_content={"result": value}
        )

    server = Server("anchor", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _spawn(args: list[str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            if process.poll() is not None:
                raise SystemExit(f"server {args} exited with {process.returncode}") from None
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"server {args} did not listen on port {port}")


async def _round(url: str, calls: int, sessions: int) -> tuple[list[float], list[str]]:
    from mcp import Client

    latencies: list[float] = []
    errors: list[str] = []
    clients = [Client(url) for _ in range(sessions)]
    for client in clients:
        await client.__aenter__()
    try:
        await asyncio.gather(*(client.list_tools() for client in clients))

        async def one(index: int) -> None:
            client = clients[index % sessions]
            started = time.perf_counter()
            try:
                result = await client.call_tool("add", {"a": index, "b": 1})
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            latencies.append(time.perf_counter() - started)
            if result.is_error or result.structured_content != {"result": index + 1}:
                errors.append(f"call {index}: wrong answer {result.structured_content!r}")

        await asyncio.gather(*(one(index) for index in range(calls)))
    finally:
        for client in reversed(clients):
            await client.__aexit__(None, None, None)
    return latencies, errors


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls in flight per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server")
    parser.add_argument("--sessions", type=int, default=10, help="client sessions per round")
    parser.add_argument("--bare-server", type=int, default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.bare_server is not None:
        _bare_server(options.bare_server)
        return 0
    ports = {"toolproof": _free_port(), "anchor": _free_port()}
    commands = {
        "toolproof": [
            sys.executable,
            "-c",
            "from toolproof.adapters.cli import main; main()",
            "serve",
            "--config",
            str(CONFIG),
            "--http",
            f"127.0.0.1:{ports['toolproof']}",
        ],
        "anchor": [sys.executable, __file__, "--bare-server", str(ports["anchor"])],
    }
    processes = {name: _spawn(command, ports[name]) for name, command in commands.items()}
    samples: dict[str, list[float]] = {name: [] for name in ports}
    errors: dict[str, list[str]] = {name: [] for name in ports}
    try:
        for name in ports:  # warm-up: imports, first sessions
            asyncio.run(_round(f"http://127.0.0.1:{ports[name]}/mcp", 20, 2))
        for _ in range(options.rounds):
            for name in ports:
                url = f"http://127.0.0.1:{ports[name]}/mcp"
                latencies, failed = asyncio.run(_round(url, options.calls, options.sessions))
                samples[name] += latencies
                errors[name] += failed
    finally:
        for process in processes.values():
            process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
    print(
        f"{options.calls} concurrent MCP tool calls over streamable HTTP, "
        f"{options.sessions} sessions, {options.rounds} rounds, {os.cpu_count()} CPUs"
    )
    for name in ports:
        values = samples[name]
        median = statistics.median(values) * 1000 if values else float("nan")
        p99 = _p99(values) * 1000 if values else float("nan")
        print(
            f"  {name:9s} calls {len(values):5d}  errors {len(errors[name]):3d}  "
            f"median {median:8.1f} ms  p99 {p99:8.1f} ms"
        )
        for message in errors[name][:5]:
            print(f"    error: {message}")
    if samples["toolproof"] and samples["anchor"]:
        ratio = statistics.median(samples["toolproof"]) / statistics.median(samples["anchor"])
        print(f"  median ratio toolproof/anchor: {ratio:.2f}")
    return 1 if any(errors.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
