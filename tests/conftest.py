"""Shared fixtures, the shared helpers' path, and the guard that the tests leave packages as found.

The helpers shared across folders (``tests/runs/*_support.py``) are importable from
every test folder: ``tests/runs`` is put on ``sys.path`` here, once.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_RUNS = str(ROOT / "tests" / "runs")
if _RUNS not in sys.path:
    sys.path.insert(0, _RUNS)
PLUGINS = ROOT / "tests" / "plugins"
PIP_SECONDS = 280  # a pip build with an isolated build environment, on a loaded machine


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def exporter() -> Iterator[object]:
    """toolproof instrumented with an SDK provider whose spans stay in memory.

    Yields the ``InMemorySpanExporter`` (``get_finished_spans()``); uninstruments after.
    OpenTelemetry is imported here, not at the top, so a run without it collects.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import toolproof
    from toolproof.adapters.telemetry.instrument import uninstrument

    made = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(made))
    toolproof.instrument(tracer_provider=provider)
    yield made
    uninstrument()


def installed_distributions() -> list[str]:
    """``name==version`` of every distribution in this environment's site-packages, sorted.

    What ``pip list --format=freeze`` lists; the paths on ``sys.path`` that a test adds
    (a plugin built into a temporary folder) are not searched.
    """
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return sorted(
        f"{dist.metadata['Name']}=={dist.version}"
        for dist in importlib.metadata.distributions(path=paths)
    )


_BEFORE = installed_distributions()


@pytest.fixture
def site_packages() -> Callable[[], list[str]]:
    """:func:`installed_distributions`, for a test to compare before and after."""
    return installed_distributions


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when a test installed or removed a package in this environment."""
    after = installed_distributions()
    if after != _BEFORE:
        added = sorted(set(after) - set(_BEFORE))
        removed = sorted(set(_BEFORE) - set(after))
        sys.stderr.write(
            f"\nthe tests changed the environment's packages: added {added}, removed {removed}\n"
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give a test that may build a plugin (its setup runs pip) the time pip needs.

    When the backend tests are collected, every test also ignores a socket to their own
    Redis that the GC reports unclosed: Celery's result consumer keeps a connection per
    executor thread, and a thread still waiting on a timed-out call when its Toolset
    closes drops it; the report lands in whichever test runs next.
    """
    support = sys.modules.get("backend_support")
    port = getattr(support, "REDIS_PORT", None)
    for item in items:
        if "plugin_site" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(PIP_SECONDS + 60))
        if port is not None:
            item.add_marker(
                pytest.mark.filterwarnings(
                    "ignore:Exception ignored in. <socket.socket [^>]*"
                    rf"raddr=\('127.0.0.1', {port}\)>:pytest.PytestUnraisableExceptionWarning"
                )
            )


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Build ``tests/plugins/<name>`` into a temporary folder, once per session.

    ``pip install --no-deps --target DIR`` of a copy of the package (the source tree
    stays clean): the package and its ``.dist-info`` (entry points) land in ``DIR``,
    never in this environment's site-packages. Returns ``name -> DIR``.
    """
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in built:
            work = tmp_path_factory.mktemp(f"plugin-{name}")
            source = work / "source"
            shutil.copytree(PLUGINS / name, source)
            target = work / "site"
            command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
            command += ["--disable-pip-version-check", "--target", str(target), str(source)]
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=PIP_SECONDS, check=False
            )
            assert done.returncode == 0, done.stderr
            built[name] = target
        return built[name]

    return build


@pytest.fixture(scope="module")
def install_plugin(plugin_site: Callable[[str], Path]) -> Iterator[Callable[[str], None]]:
    """Make ``tests/plugins/<name>`` importable and its entry points visible, for one module.

    The built folder goes first on ``sys.path`` (``importlib.metadata`` finds the entry
    points there) and on ``PYTHONPATH`` (so do the ``toolproof`` processes a test
    starts). At the module's end both are restored: nothing is installed in the
    environment. Modules already imported stay in ``sys.modules`` (importing a plugin
    registers its extensions; a second import would register them twice).
    """
    with pytest.MonkeyPatch.context() as patch:

        def install(name: str) -> None:
            target = plugin_site(name)
            patch.syspath_prepend(str(target))
            paths = [str(target), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
            patch.setenv("PYTHONPATH", os.pathsep.join(paths))

        yield install
