"""MCP import against real servers started over stdio (and one over streamable HTTP).

``mcp-server-time`` and ``mcp-server-git`` come from PyPI (``[dev]``);
``@modelcontextprotocol/server-everything`` from npm (``.ci/services``). Their
``tools/list`` answers were captured in ``shared/cases/mcp/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp_support import alive, cmdline, descendants, everything_bin, mcp1_venv, servers

from toolproof import load_toolset
from toolproof.contract.tools import ToolAnnotations
from toolproof.tools.resources import MCP_SERVERS

pytestmark = pytest.mark.service

BIN = Path(sys.executable).parent
GIT_TOOLS = [  # as captured from mcp-server-git 2026.10.19
    "git_add",
    "git_branch",
    "git_checkout",
    "git_commit",
    "git_create_branch",
    "git_diff",
    "git_diff_staged",
    "git_diff_unstaged",
    "git_log",
    "git_reset",
    "git_show",
    "git_status",
]
EVERYTHING_TOOLS = [  # as captured from @modelcontextprotocol/server-everything 2026.8.31
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "simulate-research-query",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
]


def command(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert found is not None, f"{name} is not installed (pip install -e '.[dev]')"
    return found


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(text, encoding="utf-8")
    return path


def git_repo(path: Path) -> Path:
    path.mkdir()
    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "Test"],
        ["config", "user.email", "test@example.invalid"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, env={**os.environ, **env})
    (path / "README.md").write_text("hello\n", encoding="utf-8")
    subprocess.run(["git", "add", "README.md"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=path, check=True)
    return path


def test_time_server_tools_bind_and_answer(tmp_path: Path) -> None:
    config = (
        f'[[mcp]]\nname = "time"\ncommand = "{command("mcp-server-time")}"\n'
        'args = ["--local-timezone", "UTC"]\n'
    )

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert toolset.names() == ["time_convert_time", "time_get_current_time"]
            assert toolset.quarantined == ()
            now = toolset["time_get_current_time"]
            assert now.spec.output_schema is not None
            assert now.spec.annotations.readOnlyHint is True
            value: Any = (await now.call({"timezone": "UTC"})).unwrap()
            assert value["timezone"] == "UTC"
            moment = datetime.fromisoformat(value["datetime"])
            assert abs((moment - datetime.now(UTC)).total_seconds()) < 120
            converted = await toolset["time_convert_time"].call(
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
            result: Any = converted.unwrap()
            assert result["source"]["datetime"].endswith("T12:00:00+00:00")
            assert result["target"]["datetime"].endswith("T21:00:00+09:00")
            assert result["time_difference"] == "+9.0h"
            bad = (await now.call({"timezone": "Not/AZone"})).failure
            assert bad is not None
            assert bad.kind == "tool_error"
            assert "Not/AZone" in bad.message

    asyncio.run(main())


def test_git_server_tools_bind_and_work_on_a_temp_repository(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    config = (
        f'[[mcp]]\nname = "git"\ncommand = "{command("mcp-server-git")}"\n'
        f'args = ["--repository", "{repo}"]\n'
    )

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert toolset.quarantined == ()
            assert toolset.names() == [f"git_{name}" for name in GIT_TOOLS]
            status = toolset["git_git_status"]
            assert status.spec.annotations == ToolAnnotations(
                readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
            )
            clean: Any = (await status.call({"repo_path": str(repo)})).unwrap()
            assert "On branch main" in clean
            assert "nothing to commit" in clean
            (repo / "new.txt").write_text("new\n", encoding="utf-8")
            added: Any = (
                await toolset["git_git_add"].call({"repo_path": str(repo), "files": ["new.txt"]})
            ).unwrap()
            assert added == "Files staged successfully"
            committed: Any = (
                await toolset["git_git_commit"].call(
                    {"repo_path": str(repo), "message": "add new.txt"}
                )
            ).unwrap()
            assert committed.startswith("Changes committed successfully with hash ")
            head = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
            ).stdout.strip()
            assert committed.endswith(head)
            log: Any = (
                await toolset["git_git_log"].call({"repo_path": str(repo), "max_count": 2})
            ).unwrap()
            assert log.index("add new.txt") < log.index("first")
            refused = await status.call({})
            assert refused.failure is not None
            assert refused.failure.kind == "invalid_arguments"

    asyncio.run(main())


def test_a_server_built_on_the_mcp_1x_sdk_works(tmp_path: Path) -> None:
    venv = mcp1_venv()
    version = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert version.startswith("1."), version
    config = (
        f'[[mcp]]\nname = "time"\ncommand = "{venv / "bin" / "mcp-server-time"}"\n'
        'args = ["--local-timezone", "UTC"]\n'
    )

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert toolset.names() == ["time_convert_time", "time_get_current_time"]
            assert toolset.resources[MCP_SERVERS]["time"]["server_info"]["version"] == "2026.10.10"
            converted = await toolset["time_convert_time"].call(
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
            text: Any = converted.unwrap()  # no outputSchema in this release: the text block
            assert json.loads(text)["target"]["datetime"].endswith("T21:00:00+09:00")
            now: Any = (await toolset["time_get_current_time"].call({"timezone": "UTC"})).unwrap()
            assert json.loads(now)["timezone"] == "UTC"

    asyncio.run(main())


def everything_config(name: str = "everything", **keys: object) -> str:
    lines = [f'[[mcp]]\nname = "{name}"\ncommand = "{everything_bin()}"\nargs = ["stdio"]']
    lines += [f"{key} = {value}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def test_everything_server_tools_bind_or_are_quarantined_and_answer(tmp_path: Path) -> None:
    config = everything_config()
    listed = {f"everything_{name}" for name in EVERYTHING_TOOLS}

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            bound = set(toolset.names())
            quarantined = {item.name for item in toolset.quarantined}
            assert all(item.rule for item in toolset.quarantined)
            assert bound | quarantined >= listed
            echo = await toolset["everything_echo"].call({"message": "hi there"})
            assert echo.value == "Echo: hi there"
            many = await asyncio.gather(
                *(toolset["everything_echo"].call({"message": f"m{n}"}) for n in range(10))
            )
            assert [result.value for result in many] == [f"Echo: m{n}" for n in range(10)]
            total = await toolset["everything_get-sum"].call({"a": 2, "b": 40})
            assert total.value == "The sum of 2 and 40 is 42."
            weather: Any = (
                await toolset["everything_get-structured-content"].call({"location": "Chicago"})
            ).unwrap()
            assert set(weather) == {"temperature", "conditions", "humidity"}
            image: Any = (await toolset["everything_get-tiny-image"].call({})).unwrap()
            blocks = image["toolproof/content"]
            assert [block["type"] for block in blocks] == ["text", "image", "text"]
            assert blocks[1]["mimeType"] == "image/png"

    asyncio.run(main())


ASKING_TOOLS = [  # and roots, which serve relays too (get-roots-list asks roots/list)
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-sampling-request",
    "trigger-url-elicitation",
]


def test_everything_offers_its_asking_tools_only_to_a_client_that_can_answer(
    tmp_path: Path,
) -> None:
    # outside toolproof serve nobody answers sampling or elicitation: neither capability
    # is announced, so the server does not offer the tools that would ask
    config = write(tmp_path, everything_config())

    async def main() -> None:
        async with load_toolset(config) as toolset:
            entry = toolset.resources[MCP_SERVERS]["everything"]
            assert entry["protocol_version"] == "2025-11-25"  # after server/discover failed
            assert toolset.names() == [f"everything_{name}" for name in EVERYTHING_TOOLS]
        async with load_toolset(config, relay=True) as toolset:  # as toolproof serve loads
            assert toolset.names() == sorted(
                f"everything_{name}" for name in EVERYTHING_TOOLS + ASKING_TOOLS
            )

    asyncio.run(main())


def test_killing_a_real_server_mid_call_fails_within_the_call_timeout(tmp_path: Path) -> None:
    config = everything_config(call_timeout=20)

    async def main() -> None:
        before = descendants()
        async with load_toolset(write(tmp_path, config)) as toolset:
            spawned = servers(descendants() - before)
            [server] = [pid for pid in spawned if "mcp-server-everything" in cmdline(pid)]
            slow = toolset["everything_trigger-long-running-operation"]
            call = asyncio.create_task(slow.call({"duration": 30, "steps": 3}))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            os.kill(server, signal.SIGKILL)
            result = await call
            assert time.monotonic() - started < 20
            assert result.failure is not None
            assert (result.failure.kind, result.failure.where) == ("transport", "transport")

    asyncio.run(main())


def test_no_real_server_process_outlives_the_toolset(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    config = (
        everything_config()
        + f'[[mcp]]\nname = "time"\ncommand = "{command("mcp-server-time")}"\n'
        + f'[[mcp]]\nname = "git"\ncommand = "{command("mcp-server-git")}"\n'
        + f'args = ["--repository", "{repo}"]\n'
    )

    async def main() -> None:
        before = descendants()
        toolset = await load_toolset(write(tmp_path, config))
        spawned = descendants() - before
        lines = " ".join(cmdline(pid) for pid in spawned)
        for name in ("mcp-server-everything", "mcp-server-time", "mcp-server-git"):
            assert name in lines
        assert toolset.quarantined == ()
        await toolset.aclose()
        assert alive(spawned) == set()

    asyncio.run(main())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_everything_over_streamable_http(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [str(everything_bin()), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "streamable-HTTP server did not listen"
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        config = f'[[mcp]]\nname = "web"\nurl = "{url}"\nheaders = {{X-Test = "1"}}\n'

        async def main() -> None:
            async with load_toolset(write(tmp_path, config)) as toolset:
                assert toolset.quarantined == ()
                echo = await toolset["web_echo"].call({"message": "over http"})
                assert echo.value == "Echo: over http"
                total = await toolset["web_get-sum"].call({"a": 1, "b": 2})
                assert total.value == "The sum of 1 and 2 is 3."

        asyncio.run(main())
    finally:
        server.terminate()
        server.wait(timeout=10)
