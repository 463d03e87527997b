"""``toolproof lock [--check|--update]`` and ``tools list --json`` as a user runs them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cli_support import Ran, toolproof
from test_lock import DEFINITIONS, _mutate, _set, config  # noqa: F401 - the fixture


def _cli(*args: str, cwd: Path) -> Ran:
    return toolproof(*args, cwd=cwd)


def test_lock_check_update_cycle(config: Path) -> None:  # noqa: F811 - the fixture
    cwd = config.parent
    written = _cli("lock", "--config", "toolproof.toml", "--json", cwd=cwd)
    assert written.returncode == 0, written.stderr
    document = json.loads(written.stdout)
    lock_bytes = (cwd / "toolproof.lock").read_bytes()
    assert document["written"] is True
    assert document["digest"] == "sha256:" + hashlib.sha256(lock_bytes).hexdigest()
    assert _cli("lock", "--check", cwd=cwd).returncode == 0

    _mutate(config, _set(["inputSchema", "properties", "path", "pattern"], ".*"))
    check = _cli("lock", "--check", cwd=cwd)
    assert check.returncode == 2
    assert check.stdout.splitlines() == [
        "fs_read_file changed",
        '  /inputSchema/properties/path/pattern: "^[a-z/]+$" -> ".*"',
        "1 tools drifted from toolproof.lock",
    ]
    listing = json.loads(_cli("tools", "list", "--json", cwd=cwd).stdout)
    assert [tool["name"] for tool in listing["tools"]] == ["fs_delete_file"]
    assert listing["quarantined"][0]["drift"] == {
        "name": "fs_read_file",
        "kind": "changed",
        "changes": [
            {"pointer": "/inputSchema/properties/path/pattern", "old": "^[a-z/]+$", "new": ".*"}
        ],
    }
    again = _cli("lock", cwd=cwd)  # plain lock never overwrites a lock that differs
    assert again.returncode == 2
    assert again.stdout.splitlines()[-1] == (
        "1 tools differ from toolproof.lock: review, then toolproof lock --update"
    )
    assert (cwd / "toolproof.lock").read_bytes() == lock_bytes

    update = _cli("lock", "--update", cwd=cwd)
    assert update.returncode == 0, update.stderr
    assert update.stdout.splitlines()[2] == "accepted 1 changes into toolproof.lock"
    assert _cli("lock", "--check", cwd=cwd).returncode == 0
    listing = json.loads(_cli("tools", "list", "--json", cwd=cwd).stdout)
    assert [tool["name"] for tool in listing["tools"]] == ["fs_delete_file", "fs_read_file"]


def test_lock_check_without_a_lock_is_an_input_error(config: Path) -> None:  # noqa: F811
    done = _cli("lock", "--check", cwd=config.parent)
    assert done.returncode == 1
    assert "no lock at toolproof.lock: write one with toolproof lock" in done.stderr
