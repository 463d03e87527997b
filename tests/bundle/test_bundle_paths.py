from __future__ import annotations

from pathlib import Path

import pytest

from toolproof.bundle.paths import check_relative_path, confine, path_problem
from toolproof.errors import InputError


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", "is empty"),
        ("/etc/passwd", "is absolute (paths are relative to the artifact root)"),
        ("C:/x", "starts with a drive letter (paths are relative POSIX)"),
        ("a\\b", "contains a backslash (paths are POSIX: use '/')"),
        ("a/../b", "has a '..' segment (no '.', '..' or '//')"),
        ("./a", "has a '.' segment (no '.', '..' or '//')"),
        ("a//b", "has a 'empty' segment (no '.', '..' or '//')"),
        ("a\x00", "contains a NUL byte"),
        ("runs/run_1/evidence/ab", None),
    ],
)
def test_path_rules(path: str, problem: str | None) -> None:
    assert path_problem(path) == problem


def test_check_relative_path_raises_with_fields() -> None:
    with pytest.raises(InputError) as info:
        check_relative_path("../x", what="run")
    assert info.value.message == "run '../x' has a '..' segment (no '.', '..' or '//')"
    assert info.value.fields["path"] == "../x"


def test_confine_follows_symlinks_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "runs").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "runs" / "escape").symlink_to(tmp_path / "elsewhere")
    assert confine(root, "runs") == (root / "runs").resolve()
    with pytest.raises(InputError, match="resolves outside the artifact root"):
        confine(root, "runs/escape")
