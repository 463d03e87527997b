"""The ``toolproof`` pytest plugin (entry point ``pytest11``): fixtures for extension authors.

Fixtures:

* ``toolproof_cassette``: ``toolproof_cassette(path, mode="none", task=None) -> Cassette``
  (record modes ``none``, ``once``, ``new_episodes``); after the test, what a recording
  cassette recorded is saved to ``path``, then any call a cassette could not serve
  fails the test, naming the call (with the nearest recorded call as a diff).
* ``toolproof_run``: ``toolproof_run(spec, toolset) -> RunOutcome``: a live run under
  the test's ``tmp_path``.

The assertions live in :mod:`toolproof.testing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from toolproof.runs.run import RunOutcome
    from toolproof.testing.cassette import Cassette
    from toolproof.tools.toolset import Toolset


@pytest.fixture
def toolproof_cassette() -> Iterator[Callable[..., Cassette]]:
    """Open recorded runs as cassettes; save what they recorded, and fail a test that missed.

    Yields:
        ``open(path, mode="none", *, task=None) -> Cassette`` (arguments as
        :class:`~toolproof.testing.Cassette`).

    """
    from toolproof.testing.cassette import Cassette

    opened: list[Cassette] = []

    def open_cassette(path: str | Path, mode: str = "none", *, task: str | None = None) -> Cassette:
        cassette = Cassette(path, mode, task=task)
        opened.append(cassette)
        return cassette

    yield open_cassette
    for cassette in opened:
        asyncio.run(cassette.save())
    misses = [miss for cassette in opened for miss in cassette.misses]
    if misses:
        pytest.fail("\n\n".join(misses), pytrace=False)


@pytest.fixture
def toolproof_run(tmp_path: Path) -> Callable[[Any, Toolset], RunOutcome]:
    """Run a spec (a ``RunSpec`` or its JSON) live against a Toolset under ``tmp_path``."""
    from toolproof.contract.runs import RunSpec
    from toolproof.runs.run import execute_run

    def run(spec: Any, toolset: Toolset) -> RunOutcome:
        model = spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)
        return asyncio.run(execute_run(model, root=tmp_path, toolset=toolset))

    return run
