"""The sandbox backend: real bubblewrap sandboxes, real rules broken for real."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolproof.config import build_toolset, load_toolset
from toolproof.contract.tools import ToolResult
from toolproof.tools.toolset import Toolset

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox" / "sandbox_tools.py"
TOOLS = (
    "environ",
    "write",
    "listing",
    "connect",
    "connect_quietly",
    "connect_unix",
    "connect_in_thread",
    "shell",
    "sleep",
    "fork_bomb",
    "hog",
    "spin",
    "rss",
)


@pytest.fixture(autouse=True, scope="module")
def bubblewrap() -> None:
    """Skip without ``bwrap``, except under ``CI=true`` (``.ci/services`` installs it)."""
    if shutil.which("bwrap") is None:
        message = "needs bubblewrap: apt-get install bubblewrap (.ci/services installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def write_config(folder: Path, backends: str, variant: str = "") -> Path:
    """A composition root binding every fixture tool with a ``sandbox`` variant."""
    shutil.copy(FIXTURE, folder / "sandbox_tools.py")
    layer = f'[{{ name = "sandbox", config = {{ {variant} }} }}]' if variant else '["sandbox"]'
    text = '[[python]]\nmodule = "sandbox_tools"\n\n'
    for tool in TOOLS:
        text += f"[tools.{tool}]\nextensions = [{layer}]\n\n"
    text += f"[backends.sandbox]\n{backends}\n"
    path = folder / "toolproof.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def toolset(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolset]:
    folder = tmp_path_factory.mktemp("sandbox")
    os.environ["TOOLPROOF_TEST_KEPT"] = "kept"
    os.environ["TOOLPROOF_TEST_SECRET"] = "secret"
    config = write_config(folder, 'env = ["TOOLPROOF_TEST_KEPT"]\nworkers = 1\ntimeout = 5')
    built = asyncio.run(build_toolset(config))
    yield built
    asyncio.run(built.aclose())
    for name in ("TOOLPROOF_TEST_KEPT", "TOOLPROOF_TEST_SECRET"):
        os.environ.pop(name, None)


def call(toolset: Toolset, tool: str, arguments: dict[str, Any]) -> ToolResult:
    return asyncio.run(toolset[f"{tool}_sandbox"].call(arguments))


def test_environment_is_scrubbed_to_the_named_variables(toolset: Toolset) -> None:
    environment = call(toolset, "environ", {}).value
    scratch = environment.pop("TMPDIR")
    assert environment == {"TOOLPROOF_TEST_KEPT": "kept", "TOOLPROOF_WORKER": "1"}
    assert scratch.startswith("/tmp/toolproof-sandbox-")


def test_scratch_is_writable_and_empty_at_every_call(tmp_path: Path) -> None:
    async def session() -> list[Any]:
        async with load_toolset(write_config(tmp_path, "workers = 1")) as built:
            first = await built["listing_sandbox"].call({})
            written = await built["write_sandbox"].call({"path": "note.txt", "text": "hi"})
            after = await built["listing_sandbox"].call({})
            return [first.value, Path(written.value).name, after.value]

    assert asyncio.run(session()) == [[], "note.txt", []]


def test_a_relative_write_lands_in_scratch(toolset: Toolset) -> None:
    written = call(toolset, "write", {"path": "note.txt", "text": "hello"}).value
    assert Path(written).name == "note.txt"
    assert call(toolset, "listing", {}).value == []


def test_a_write_outside_scratch_is_denied_naming_the_rule(toolset: Toolset) -> None:
    failure = call(toolset, "write", {"path": "/etc/toolproof-evil", "text": "x"}).failure
    assert failure is not None
    assert failure.kind == "denied_by_sandbox"
    assert failure.where == "worker"
    assert failure.message.startswith(
        "tool 'write' broke its sandbox profile: write denied: /etc/toolproof-evil not in "
        "scratch /tmp/toolproof-sandbox-"
    )
    assert not Path("/etc/toolproof-evil").exists()


def test_the_kernel_refuses_writes_no_hook_sees(toolset: Toolset, tmp_path: Path) -> None:
    target = tmp_path / "from-a-shell"
    result = call(toolset, "shell", {"script": f"echo x > {target}"}).value
    assert result["status"] == 2
    assert result["stderr"].endswith("Read-only file system")
    assert not target.exists()


def test_a_connect_is_denied_naming_the_rule(toolset: Toolset) -> None:
    failure = call(toolset, "connect", {"host": "127.0.0.1", "port": 9}).failure
    assert failure is not None
    assert failure.kind == "denied_by_sandbox"
    assert failure.message == (
        "tool 'connect' broke its sandbox profile: egress denied: 127.0.0.1:9 not in allow"
    )
    assert failure.detail == {"rules": ["egress denied: 127.0.0.1:9 not in allow"]}


def test_a_body_that_hides_the_denial_still_fails(toolset: Toolset) -> None:
    failure = call(toolset, "connect_quietly", {"host": "10.1.2.3", "port": 80}).failure
    assert failure is not None
    assert failure.message == (
        "tool 'connect_quietly' broke its sandbox profile: egress denied: 10.1.2.3:80 not in allow"
    )


def test_the_network_namespace_holds_only_loopback(toolset: Toolset) -> None:
    script = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
    assert call(toolset, "shell", {"script": script}).value == {
        "status": 0,
        "stdout": "lo",
        "stderr": "",
    }


def test_a_timeout_kills_the_sandbox(toolset: Toolset) -> None:
    failure = call(toolset, "sleep", {"seconds": 30}).failure
    assert failure is not None and failure.kind == "timeout"
    assert call(toolset, "sleep", {"seconds": 0}).value == 0


def test_a_changed_profile_changes_the_descriptor(tmp_path: Path) -> None:
    async def digests(backends: str) -> tuple[str, str]:
        folder = tmp_path / str(abs(hash(backends)))
        folder.mkdir()
        async with load_toolset(write_config(folder, backends)) as built:
            return built["connect_sandbox"].descriptor().fingerprint, built.descriptor().digest

    closed = asyncio.run(digests("workers = 1"))
    opened = asyncio.run(digests('workers = 1\nallow = ["127.0.0.1:8031"]'))
    assert closed[0] != opened[0]
    assert closed[1] != opened[1]
    assert asyncio.run(digests("allow = []\nworkers = 1")) == closed


def quarantined(config: Path) -> dict[str, str]:
    """Build the Toolset from ``config``; return each quarantined variant's rule."""

    async def build() -> dict[str, str]:
        async with load_toolset(config) as built:
            assert "connect_sandbox" not in built
            return {item.name: item.rule for item in built.quarantined}

    return asyncio.run(build())


def test_a_missing_mechanism_refuses_to_start(tmp_path: Path) -> None:
    rules = quarantined(write_config(tmp_path, 'bwrap = "/nonexistent/bwrap"'))
    assert rules["connect_sandbox"] == (
        "cannot apply combo [sandbox] to tool 'connect': the sandbox backend cannot start: "
        "bubblewrap ('/nonexistent/bwrap') was not found (rule: a sandbox never runs a body "
        "unconfined; install it: apt-get install bubblewrap (Debian's package; README, "
        "Installing))"
    )
    assert sorted(rules) == sorted(f"{tool}_sandbox" for tool in TOOLS)


def test_an_allow_entry_that_is_not_host_port_is_refused(tmp_path: Path) -> None:
    rules = quarantined(write_config(tmp_path, 'allow = ["api.example.com"]'))
    assert rules["connect_sandbox"] == (
        "cannot apply combo [sandbox] to tool 'connect': invalid config for extension "
        "'sandbox': allow: allow entry 'api.example.com' is not host:port (a host name or "
        "IPv4 address, a port 1-65535)"
    )


def greeter() -> int:
    """A real TCP server on a free loopback port that greets each connection; its port."""
    server = socket.create_server(("127.0.0.1", 0))
    port: int = server.getsockname()[1]

    def serve() -> None:
        while True:
            connection, _ = server.accept()
            with connection:
                connection.sendall(f"hello from {port}\n".encode())

    threading.Thread(target=serve, daemon=True).start()
    return port


@pytest.fixture(scope="module")
def open_toolset(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Toolset, int, int]]:
    """A sandbox allowing one port by address (and by ``localhost``: one listener serves
    both) and one by ``localhost`` only; their ports."""
    allowed, other = greeter(), greeter()
    folder = tmp_path_factory.mktemp("sandbox-allow")
    entries = f'"127.0.0.1:{allowed}", "localhost:{allowed}", "localhost:{other}"'
    backends = f"allow = [{entries}]\nworkers = 1\ntimeout = 20"
    built = asyncio.run(build_toolset(write_config(folder, backends)))
    yield built, allowed, other
    asyncio.run(built.aclose())


def test_an_allowed_port_is_reached_through_the_allow_list(
    open_toolset: tuple[Toolset, int, int],
) -> None:
    toolset, allowed, _ = open_toolset
    result = call(toolset, "connect", {"host": "127.0.0.1", "port": allowed})
    assert result.value == f"hello from {allowed}"
    again = call(toolset, "connect", {"host": "127.0.0.1", "port": allowed})
    assert again.value == f"hello from {allowed}"


def test_an_allowed_host_name_resolves_inside_the_sandbox(
    open_toolset: tuple[Toolset, int, int],
) -> None:
    toolset, _, other = open_toolset
    assert call(toolset, "connect", {"host": "localhost", "port": other}).value == (
        f"hello from {other}"
    )


def test_a_port_not_in_allow_stays_closed(open_toolset: tuple[Toolset, int, int]) -> None:
    toolset = open_toolset[0]
    other = greeter()  # a real server, not in allow
    failure = call(toolset, "connect", {"host": "127.0.0.1", "port": other}).failure
    assert failure is not None
    assert failure.message == (
        f"tool 'connect' broke its sandbox profile: egress denied: 127.0.0.1:{other} not in allow"
    )
    script = (
        f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {other}))\""
    )
    result = call(toolset, "shell", {"script": script}).value
    assert result["status"] == 1
    assert result["stderr"].endswith("ConnectionRefusedError: [Errno 111] Connection refused")
    lookup = call(toolset, "connect", {"host": "evil.example", "port": 443}).failure
    assert lookup is not None
    assert lookup.message == (
        "tool 'connect' broke its sandbox profile: egress denied: evil.example:443 not in allow"
    )


def test_unix_sockets_cannot_be_opened(toolset: Toolset, tmp_path: Path) -> None:
    path = str(tmp_path / "service.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen()
        result = call(toolset, "connect_unix", {"path": path}).value
    assert result == "PermissionError: Permission denied"


def test_an_allow_entry_outside_loopback_needs_a_host_name(tmp_path: Path) -> None:
    rules = quarantined(write_config(tmp_path, 'allow = ["10.1.2.3:80"]'))
    assert rules["connect_sandbox"] == (
        "cannot apply combo [sandbox] to tool 'connect': invalid config for extension "
        "'sandbox': allow: allow entry '10.1.2.3:80': the sandbox reaches an address outside "
        "127.0.0.0/8 only by a host name (its /etc/hosts maps the name)"
    )


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolset]:
    folder = tmp_path_factory.mktemp("sandbox-limits")
    backends = "workers = 1\ntimeout = 60\nmemory_mib = 128\npids = 16\ncpus = 0.1"
    built = asyncio.run(build_toolset(write_config(folder, backends)))
    yield built
    asyncio.run(built.aclose())


def test_a_fork_bomb_hits_the_process_limit(limited: Toolset) -> None:
    failure = call(limited, "fork_bomb", {"most": 1000}).failure
    assert failure is not None
    assert failure.kind == "denied_by_sandbox"
    assert failure.message == (
        "tool 'fork_bomb' broke its sandbox profile: process limit: pids=16 reached "
        "(a fork or thread was refused)"
    )
    assert call(limited, "fork_bomb", {"most": 3}).value == 3  # under the limit: no rule


def test_a_memory_hog_hits_the_memory_limit(limited: Toolset) -> None:
    failure = call(limited, "hog", {"mib": 512}).failure
    assert failure is not None
    assert failure.kind == "denied_by_sandbox"
    assert failure.detail == {
        "rules": ["memory limit: memory_mib=128 exceeded (the kernel killed a process)"]
    }
    assert call(limited, "hog", {"mib": 8}).value == 8  # a fresh worker, within the limit


def quota(path: Path) -> str | None:
    """The CPU quota of the cgroup ``path`` in microseconds per 100 ms, or None (no quota)."""
    for name in ("cpu.max", "cpu.cfs_quota_us"):
        try:
            value = (path / name).read_text(encoding="ascii").split()[0]
        except OSError:
            continue
        return None if value in ("max", "-1") else value
    return None


def cpu_cells() -> list[Path]:
    """This process's worker cgroups that carry a CPU quota (v1 ``cpu`` or v2 ``cpu.max``)."""
    found = Path("/sys/fs/cgroup").glob(f"**/toolproof-{os.getpid()}-*")
    return [path for path in found if quota(path) is not None]


def test_cpu_time_is_throttled_to_the_quota(limited: Toolset) -> None:
    assert call(limited, "spin", {"seconds": 0.3}).value > 0
    [cell] = cpu_cells()
    assert quota(cell) == "10000"  # cpus = 0.1 of a 100000 us period
    stat = dict(line.split() for line in (cell / "cpu.stat").read_text("ascii").splitlines())
    assert int(stat["nr_throttled"]) > 0


def sleepers(seconds: str) -> list[int]:
    """Host pids of the live processes running ``sleep <seconds>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()] and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def gone(seconds: str) -> bool:
    """Wait (at most 10 s) until no ``sleep <seconds>`` is left; whether none is."""
    for _ in range(500):
        if not sleepers(seconds):
            return True
        time.sleep(0.02)
    return False


def test_a_timeout_ends_what_the_body_detached(toolset: Toolset) -> None:
    seconds = f"{secrets.randbelow(10**6) + 10**6}"
    script = f"setsid sleep {seconds} >/dev/null 2>&1 & sleep 30"
    failure = call(toolset, "shell", {"script": script}).failure
    assert failure is not None and failure.kind == "timeout"
    assert gone(seconds)


def test_closing_the_toolset_ends_what_bodies_left_running(tmp_path: Path) -> None:
    seconds = f"{secrets.randbelow(10**6) + 10**6}"
    script = f"setsid sleep {seconds} >/dev/null 2>&1 &"

    async def leave_a_daemon() -> list[int]:
        async with load_toolset(write_config(tmp_path, "workers = 1")) as built:
            assert (await built["shell_sandbox"].call({"script": script})).value["status"] == 0
            for _ in range(500):  # the detached sleep may not have started yet
                if sleepers(seconds):
                    break
                await asyncio.sleep(0.02)
            return sleepers(seconds)

    assert len(asyncio.run(leave_a_daemon())) == 1
    assert gone(seconds)


def test_dev_is_read_only_and_dev_shm_is_emptied_after_each_call(toolset: Toolset) -> None:
    assert call(toolset, "shell", {"script": "touch /dev/shm/left && ls /dev/shm"}).value == {
        "status": 0,
        "stdout": "left",
        "stderr": "",
    }
    assert call(toolset, "shell", {"script": "ls /dev/shm"}).value["stdout"] == ""
    devices = call(toolset, "shell", {"script": "touch /dev/planted"}).value
    assert devices["status"] == 1
    assert devices["stderr"] == "touch: cannot touch '/dev/planted': Read-only file system"


def test_a_denial_in_a_thread_the_body_started_is_charged_to_the_call(toolset: Toolset) -> None:
    failure = call(toolset, "connect_in_thread", {"host": "127.0.0.1", "port": 9}).failure
    assert failure is not None
    assert failure.detail == {"rules": ["egress denied: 127.0.0.1:9 not in allow"]}


def test_a_kernel_that_refuses_the_namespaces_refuses_the_backend(tmp_path: Path) -> None:
    # A fake for a fault this root machine cannot cause without changing every process's
    # sysctl: a bubblewrap that fails the way it does when user namespaces are disabled.
    fake = tmp_path / "bwrap"
    said = (
        "bwrap: No permissions to create new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces."
    )
    fake.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    rules = quarantined(write_config(tmp_path, f'bwrap = "{fake}"'))
    assert rules["connect_sandbox"] == (
        "cannot apply combo [sandbox] to tool 'connect': the sandbox backend cannot start: "
        "bubblewrap could not build the sandbox (user, pid, network, ipc and uts namespaces, "
        f"read-only mounts): {said} (rule: a sandbox never runs a body unconfined; enable "
        "unprivileged user namespaces, e.g. sysctl kernel.unprivileged_userns_clone=1, or "
        "run as root)"
    )


def test_limit_cgroups_a_dead_caller_left_are_removed() -> None:
    from toolproof.backends.limits import LimitCell, Limits

    try:
        probe = LimitCell(Limits(pids=8), None)  # a cgroup v1 limit cell
    except OSError:
        pytest.skip("this host has no writable cgroup v1 pids hierarchy")
    base = probe.created[0].parent
    probe.close()
    dead = int(subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout)
    stale = base / f"toolproof-{dead}-0123456789abcdef"
    stale.mkdir()
    LimitCell(Limits(pids=8), None).close()
    assert not stale.exists()


def test_a_body_cannot_remount_the_filesystem_writable(toolset: Toolset) -> None:
    result = call(toolset, "shell", {"script": "mount -o remount,rw / && touch /etc/owned"})
    assert result.value["status"] == 32  # mount(8): the kernel refused (no capability)
    assert "permission denied" in result.value["stderr"]
    assert not Path("/etc/owned").exists()


def test_the_alias_range_is_refused_as_an_address(tmp_path: Path) -> None:
    rules = quarantined(write_config(tmp_path, 'allow = ["127.64.0.1:443"]'))
    assert rules["connect_sandbox"] == (
        "cannot apply combo [sandbox] to tool 'connect': invalid config for extension "
        "'sandbox': allow: allow entry '127.64.0.1:443': 127.64.0.0/24 is reserved for the "
        "sandbox's host-name aliases"
    )


@pytest.mark.parametrize(
    ("profile", "rule"),
    [
        ('allow = "x"', "allow: Input should be a valid list"),
        ("allow = [1]", "allow.0: Input should be a valid string"),
        ("memory_mib = -1", "memory_mib: Input should be greater than or equal to 16"),
        ('env = "PATH"', "env: Input should be a valid list"),
        ("bogus = 1", "bogus: Extra inputs are not permitted"),
    ],
)
def test_a_bad_profile_quarantines_the_variant_and_asking_for_it_says_why(
    tmp_path: Path, profile: str, rule: str
) -> None:
    async def asked() -> str:
        async with load_toolset(write_config(tmp_path, profile)) as built:
            assert built.get("listing") is not None  # the base tool still binds
            with pytest.raises(KeyError) as refused:
                built["listing_sandbox"]
            return str(refused.value.args[0])

    assert asyncio.run(asked()) == (
        "tool 'listing_sandbox' is quarantined: tools.listing.extensions[0][0]: cannot apply "
        f"combo [sandbox] to tool 'listing': invalid config for extension 'sandbox': {rule}"
    )
