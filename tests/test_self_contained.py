"""The tests stand alone: no read outside the repository, nothing left installed."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a read of the material beside the repository, in any spelling the tests have used
OUTSIDE = re.compile(r"\.\./" + "shared" + r"|parents?(\[[0-9]\])? / \"" + "shared" + '"')


def test_no_test_reads_beside_the_repository() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == []


def test_a_plugin_is_usable_but_not_installed(
    install_plugin: Callable[[str], None], site_packages: Callable[[], list[str]]
) -> None:
    before = site_packages()
    install_plugin("sample_extension")
    [entry] = [
        ep
        for ep in importlib.metadata.entry_points(group="toolproof.extensions")
        if ep.name == "shout"
    ]
    assert entry.value == "toolproof_sample_extension:shout"
    assert entry.load().name == "shout"
    module = Path(sys.modules["toolproof_sample_extension"].__file__ or "")
    assert module.parts[-3:] == ("site", "toolproof_sample_extension", "__init__.py")
    assert not module.is_relative_to(sysconfig.get_paths()["purelib"])
    assert site_packages() == before
    assert not any(name.startswith("toolproof-sample") for name in before)
    # what pip itself lists, from a process that does not inherit the plugin's path
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "toolproof-sample" not in listed.stdout.lower()
