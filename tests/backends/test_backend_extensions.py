"""``process`` as a BACKEND extension from toolproof.toml, and the locality rule for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from backend_support import CONFIG, copy_fixture, run, wait_gone

from toolproof.backends import CELERY, PROCESS
from toolproof.backends.builtin import PROCESS_POOLS
from toolproof.config import extension_registry, load_toolset
from toolproof.errors import ExtensionError
from toolproof.extensions import ComboElement, ExtensionKind, build_combo
from toolproof.tools.toolset import Toolset


def test_backends_are_registered_as_backend_extensions() -> None:
    registry = extension_registry()
    assert registry["process"] is PROCESS and registry["celery"] is CELERY
    assert PROCESS.kind is ExtensionKind.BACKEND and PROCESS.kind.relocates_execution
    assert not PROCESS.requires_body_locality and PROCESS.wants_context


def test_process_variant_runs_the_inner_tool_in_a_worker() -> None:
    async def go() -> tuple[object, object, list[int], list[int], Toolset]:
        async with load_toolset(CONFIG) as toolset:
            added = (await toolset["add_process"].call({"a": 20, "b": 22})).value
            pid = (await toolset["whoami_process"].call({})).value
            pools = toolset.resources.clients(PROCESS_POOLS)
            assert len(pools) == 1  # every process variant of the Toolset shares one pool
            pids = [p for pool in pools for p in pool.pids()]
            return added, pid, pids, [], toolset

    added, pid, pids, _, toolset = run(go())
    assert added == 42
    assert isinstance(pid, int) and pid != os.getpid() and pid in pids
    assert wait_gone(pids) == []  # closing the Toolset ended every worker
    variant = toolset["add_process"]
    assert variant.base == "add"
    assert [(layer.name, layer.kind) for layer in variant.stack] == [("process", "backend")]
    assert variant.spec.input_schema == toolset["add"].spec.input_schema
    assert variant.spec.output_schema == toolset["add"].spec.output_schema


def test_invalid_arguments_never_reach_a_worker() -> None:
    async def go() -> tuple[object, list[int]]:
        async with load_toolset(CONFIG) as toolset:
            result = await toolset["add_process"].call({"a": "1", "b": 2})
            pools = toolset.resources.clients(PROCESS_POOLS)
            return result.failure, [p for pool in pools for p in pool.pids()]

    failure, pids = run(go())
    assert failure is not None and failure.kind == "invalid_arguments"
    assert failure.message == (
        "invalid arguments for tool 'add_process': argument 'a': \"1\" is not of type \"integer\""
    )
    assert pids == []  # not even a worker was started


def test_process_timeout_from_config_kills_the_body() -> None:
    async def go() -> object:
        async with load_toolset(CONFIG) as toolset:
            return (await toolset["sleepy_process"].call({"seconds": 5})).failure

    failure = run(go())
    assert failure is not None
    assert (failure.kind, failure.where) == ("timeout", "worker")
    assert failure.message.startswith("tool 'sleepy' did not finish within 1.0 s: worker process")


def test_locality_wrapper_inside_the_backend_runs_in_the_worker(tmp_path: Path) -> None:
    probe = tmp_path / "probe.txt"
    os.environ["BACKEND_PROBE_FILE"] = str(probe)
    try:

        async def go() -> object:
            async with load_toolset(CONFIG) as toolset:
                assert toolset["whoami_local_probe_process"].base == "whoami"
                return (await toolset["whoami_local_probe_process"].call({})).value

        body_pid = run(go())
    finally:
        del os.environ["BACKEND_PROBE_FILE"]
    probe_pids = [int(line) for line in probe.read_text(encoding="utf-8").split()]
    # The probe ran once, in the worker, in the same process as the body.
    assert probe_pids == [body_pid]
    assert body_pid != os.getpid()


def test_locality_wrapper_outside_the_backend_is_refused(tmp_path: Path) -> None:
    config = copy_fixture(
        tmp_path,
        '[[python]]\nmodule = "backend_tools"\n\n[extensions]\nmodules = ["backend_exts"]\n\n'
        '[tools.whoami]\nextensions = [["process", "local_probe"], ["local_probe", "process"]]\n',
    )

    async def go() -> tuple[list[str], list[tuple[str, str, str]]]:
        async with load_toolset(config) as toolset:
            quarantined = [(q.name, q.field, q.rule) for q in toolset.quarantined]
            return toolset.names(), quarantined

    names, quarantined = run(go())
    # The refused combo binds its valid prefix whoami_process; its invalid layer is named.
    assert [name for name in names if name.startswith("whoami")] == [
        "whoami",
        "whoami_local_probe",
        "whoami_local_probe_process",
        "whoami_process",
    ]
    assert quarantined == [
        (
            "whoami_process_local_probe",
            "tools.whoami.extensions[0][1]",
            "cannot apply combo [process, local_probe] to tool 'whoami': extension "
            "'local_probe' requires body locality but is placed after (outside) relocating "
            "extension 'process' (rule: put it before 'process' in the combo so it runs "
            "where the body runs) (its valid prefix binds: whoami_process)",
        )
    ]


def test_two_backends_in_one_combo_are_refused(tmp_path: Path) -> None:
    config = copy_fixture(
        tmp_path,
        '[[python]]\nmodule = "backend_tools"\n\n'
        '[tools.add]\nextensions = [["process", "celery"]]\n',
    )

    async def go() -> tuple[list[str], list[tuple[str, str, str]]]:
        async with load_toolset(config) as toolset:
            quarantined = [(q.name, q.field, q.rule) for q in toolset.quarantined]
            return toolset.names(), quarantined

    names, quarantined = run(go())
    assert [name for name in names if name.startswith("add")] == ["add", "add_process"]
    assert quarantined == [
        (
            "add_process_celery",
            "tools.add.extensions[0][1]",
            "cannot apply combo [process, celery] to tool 'add': two backend extensions "
            "('process' and 'celery') in one combo (rule: backend is not multiple: at most "
            "one per combo) (its valid prefix binds: add_process)",
        )
    ]


def test_process_needs_a_composition_root_file() -> None:
    async def go() -> None:
        async with load_toolset(CONFIG) as toolset:
            with pytest.raises(ExtensionError) as caught:
                build_combo(
                    toolset["add"], [ComboElement("process")], registry=extension_registry()
                )
            assert caught.value.fields["rule"] == (
                "the process backend needs a composition-root file (rule: a worker rebuilds "
                "the same Toolset from the same toolproof.toml; use load_toolset)"
            )

    run(go())


def test_bad_process_config_is_quarantined(tmp_path: Path) -> None:
    config = copy_fixture(
        tmp_path,
        '[[python]]\nmodule = "backend_tools"\n\n'
        '[tools.add]\nextensions = [[{name = "process", config = {workers = 0}}]]\n',
    )

    async def go() -> list[str]:
        async with load_toolset(config) as toolset:
            return [q.rule for q in toolset.quarantined]

    assert run(go()) == [
        "cannot apply combo [process] to tool 'add': invalid config for extension 'process': "
        "workers: Input should be greater than or equal to 1"
    ]
