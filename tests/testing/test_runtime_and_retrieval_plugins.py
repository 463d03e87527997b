"""Runtime and retrieval plugins from entry points: identity in the runtime, refusal when broken."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from runs_support import Counter, base_spec, make_toolset

from toolproof import load_toolset
from toolproof.contract.runs import ExecutionRuntime, RunSpec
from toolproof.errors import ConfigError, InputError
from toolproof.runs.registries import RunRegistries
from toolproof.runs.run import RunOutcome, execute_run
from toolproof.runs.runtime_plugin import RuntimeRegistry
from toolproof.sources.retrieval.seam import RetrievalRegistry
from toolproof.testing import assert_frozen_replay, assert_retrieval_conforms

pytestmark = pytest.mark.usefixtures("sample_plugin")


def _run(root: Path, runtime: object, registries: RunRegistries | None = None) -> RunOutcome:
    spec = RunSpec.model_validate(base_spec())
    toolset = make_toolset(Counter())
    return asyncio.run(
        execute_run(spec, root=root, toolset=toolset, runtime=runtime, registries=registries)  # type: ignore[arg-type]
    )


def test_a_runtime_plugin_enters_the_runtime_descriptor(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "sample-app")
    runtime = ExecutionRuntime.model_validate_json((outcome.path / "runtime.json").read_bytes())
    [provider] = runtime.providers
    assert (runtime.kind, provider.kind, provider.name, provider.origin) == (
        "app",
        "runtime",
        "sample-app",
        "toolproof-sample-reasoner:toolproof_sample_reasoner.runtime:AppRuntime",
    )
    assert outcome.report.outcome == "passed" and outcome.live_calls == 3
    assert_frozen_replay(outcome.path)
    local = _run(tmp_path, None)
    assert local.run_id != outcome.run_id


def test_a_runtime_registered_in_code_is_found_by_name(tmp_path: Path) -> None:
    from toolproof_sample_reasoner.runtime import AppRuntime

    runtimes = RuntimeRegistry()
    runtimes.register("in-code", AppRuntime)
    outcome = _run(tmp_path, "in-code", RunRegistries(runtimes=runtimes))
    runtime = ExecutionRuntime.model_validate_json((outcome.path / "runtime.json").read_bytes())
    [provider] = runtime.providers
    assert (runtime.kind, provider.name, provider.origin) == ("app", "sample-app", "registered")
    with pytest.raises(InputError, match="unknown runtime 'in-code'"):
        _run(tmp_path, "in-code")  # another run's registry does not have it


def test_a_changed_runtime_configuration_changes_the_run(tmp_path: Path) -> None:
    from toolproof_sample_reasoner.runtime import AppRuntime

    first = _run(tmp_path, AppRuntime())
    other = AppRuntime()
    other.tenant = "shop-2"
    second = _run(tmp_path, other)
    assert first.run_id != second.run_id
    assert first.outcome.claims == second.outcome.claims


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "nope",
            "unknown runtime 'nope': no registered runtime and no 'toolproof.runtimes' entry "
            "point has that name",
        ),
        (
            "sample-not-a-runtime",
            "runtime plugin 'sample-not-a-runtime' (toolproof-sample-reasoner:"
            "toolproof_sample_reasoner.broken:not_a_reasoner) cannot be used: the entry point is "
            "<function not_a_reasoner",
        ),
    ],
)
def test_an_unknown_or_broken_runtime_refuses_the_run(
    tmp_path: Path, name: str, message: str
) -> None:
    with pytest.raises(InputError) as caught:
        _run(tmp_path, name)
    assert caught.value.message.startswith(message)
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


DOCUMENTS = {
    "lists.txt": "A list comprehension builds a list from an iterable in one expression.",
    "dicts.txt": "A dict maps keys to values; keys must be hashable.",
}


def _config(tmp_path: Path, retriever: str, key: str = "retriever") -> Path:
    (tmp_path / "corpus").mkdir(parents=True)
    for name, text in DOCUMENTS.items():
        (tmp_path / "corpus" / name).write_text(text, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[retrieval]]\ncorpus = "corpus"\n{key} = "{retriever}"\ncache = ".cache"\n',
        encoding="utf-8",
    )
    return config


def test_a_retrieval_plugin_binds_from_the_toml_and_conforms(tmp_path: Path) -> None:
    async def source() -> str:
        async with load_toolset(_config(tmp_path, "sample-fts")) as toolset:
            return toolset["retrieve"].descriptor().source

    assert asyncio.run(source()).startswith("retrieval:sample-fts:sha256:")
    from toolproof.evidence.corpus import load_corpus

    retriever = RetrievalRegistry().create("sample-fts", load_corpus(tmp_path / "corpus"), {})
    try:
        assert_retrieval_conforms(retriever, "list comprehension")
    finally:
        retriever.close()


def test_an_unknown_or_broken_retriever_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        asyncio.run(load_toolset(_config(tmp_path / "a", "nope")).__aenter__())
    assert (caught.value.key, caught.value.rule) == (
        "retrieval[0].retriever",
        "unknown retriever 'nope': the built-in one is 'fts5-bm25' and no "
        "'toolproof.retrieval' entry point has that name",
    )
    with pytest.raises(ConfigError, match="cannot be used: its factory raised TypeError"):
        asyncio.run(load_toolset(_config(tmp_path / "b", "sample-not-retrieval")).__aenter__())


def test_the_old_backend_key_still_names_the_retriever_with_a_warning(tmp_path: Path) -> None:
    config = _config(tmp_path / "old", "sample-fts", key="backend")

    async def source() -> str:
        async with load_toolset(config) as toolset:
            return toolset["retrieve"].descriptor().source

    with pytest.warns(FutureWarning) as warned:
        assert asyncio.run(source()).startswith("retrieval:sample-fts:sha256:")
    assert [str(w.message) for w in warned] == [
        f"{config}: retrieval[0].backend is deprecated: write retriever = 'sample-fts' "
        "('backend' names only a relocation backend now)"
    ]
    both = _config(tmp_path / "both", "sample-fts")
    both.write_text(both.read_text(encoding="utf-8") + 'backend = "sample-fts"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        asyncio.run(load_toolset(both).__aenter__())
    assert (caught.value.key, caught.value.rule) == (
        "retrieval[0].backend",
        "'backend' is the old name of 'retriever': give only 'retriever'",
    )
