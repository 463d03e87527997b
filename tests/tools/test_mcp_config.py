"""The ``[[mcp]]`` table of ``toolproof.toml``: validation and path resolution."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from toolproof.config import McpSource, build_toolset, load_config
from toolproof.errors import ConfigError
from toolproof.sources.mcp.source import McpServer


def config_error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "toolproof.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value


@pytest.mark.parametrize(
    ("table", "rule"),
    [
        (
            'name = "x"',
            "give exactly one of 'command' (stdio) and 'url' (streamable HTTP)",
        ),
        (
            'name = "x"\ncommand = "a"\nurl = "http://127.0.0.1:1/mcp"',
            "give exactly one of 'command' (stdio) and 'url' (streamable HTTP)",
        ),
        (
            'name = "x"\nurl = "http://127.0.0.1:1/mcp"\nargs = ["a"]',
            "'args' applies to stdio servers ('command'), not 'url'",
        ),
        (
            'name = "x"\ncommand = "a"\nheaders = {Authorization = "t"}',
            "'headers' applies to streamable-HTTP servers ('url'), not 'command'",
        ),
    ],
)
def test_transport_keys_are_checked(tmp_path: Path, table: str, rule: str) -> None:
    error = config_error(tmp_path, f"[[mcp]]\n{table}\n")
    assert (error.fields["key"], error.fields["rule"]) == ("mcp[0]", rule)


def test_unknown_key_and_bad_timeout_are_refused(tmp_path: Path) -> None:
    error = config_error(tmp_path, '[[mcp]]\nname = "x"\ncommand = "a"\nport = 1\n')
    assert error.fields["key"] == "mcp[0].port"
    error = config_error(tmp_path, '[[mcp]]\nname = "x"\ncommand = "a"\ncall_timeout = 0\n')
    assert error.fields["key"] == "mcp[0].call_timeout"


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    source = McpSource(
        name="s", command="bin/server", args=["--repository", "."], cwd="work", env={"A": "1"}
    )
    assert source.server(tmp_path) == McpServer(
        name="s",
        command=str(tmp_path / "bin" / "server"),
        args=("--repository", "."),
        env={"A": "1"},
        cwd=str(tmp_path / "work"),
    )


def test_a_bare_command_stays_on_path_and_cwd_defaults_to_the_file_folder(
    tmp_path: Path,
) -> None:
    server = McpSource(name="s", command="mcp-server-time", prefix="").server(tmp_path)
    assert (server.command, server.cwd, server.prefix) == ("mcp-server-time", str(tmp_path), "")


def test_a_url_entry_keeps_its_headers_and_has_no_cwd(tmp_path: Path) -> None:
    source = McpSource(name="h", url="http://127.0.0.1:9/mcp", headers={"X-Token": "t"})
    server = source.server(tmp_path)
    assert (server.url, server.headers, server.cwd, server.command) == (
        "http://127.0.0.1:9/mcp",
        {"X-Token": "t"},
        None,
        None,
    )


def test_two_entries_with_one_name_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "toolproof.toml"
    path.write_text(
        '[[mcp]]\nname = "x"\ncommand = "a"\n[[mcp]]\nname = "y"\ncommand = "b"\n'
        '[[mcp]]\nname = "x"\ncommand = "c"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        asyncio.run(build_toolset(path))
    assert (caught.value.fields["key"], caught.value.fields["rule"]) == (
        "mcp[2].name",
        "server name 'x' is already used by mcp[0] (rule: [[mcp]] names are unique)",
    )


def test_the_examples_in_docs_mcp_md_are_valid(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    configs = []
    for block in blocks:
        path = tmp_path / "toolproof.toml"
        path.write_text(block, encoding="utf-8")
        configs.append(load_config(path)[0])
    assert [[entry.name for entry in config.mcp] for config in configs] == [
        ["git", "everything", "remote"],
        ["remote"],  # OAuth: a person (mcp login)
        ["remote"],  # OAuth: a machine
    ]
    person = configs[1].mcp[0].auth
    assert person is not None
    assert (person.grant, person.client_id, person.client_metadata_url) == (
        None,
        None,
        "https://example.com/toolproof-client.json",
    )
    auth = configs[2].mcp[0].auth
    assert auth is not None
    assert (auth.client_id, auth.client_secret_env) == ("toolproof-ci", "REMOTE_MCP_SECRET")
