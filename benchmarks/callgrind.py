"""Instructions of one Python child under callgrind: the runner of the ``count_*.py`` scripts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile


def instructions(script: str, *arguments: str) -> int:
    """Run ``python script arguments...`` under ``valgrind --tool=callgrind``; its count.

    Args:
        script: the script's path (a ``count_*.py`` re-running itself as a child).
        arguments: its command-line arguments.

    Returns:
        The instructions callgrind collected (its ``Collected :`` line), user space only.
        ``PYTHONHASHSEED`` is 0 so that two runs hash strings alike.

    Raises:
        subprocess.CalledProcessError: the child (or valgrind) failed.

    """
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={tmp}/out",
            sys.executable,
            script,
            *arguments,
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    match = re.search(r"Collected : (\d+)", done.stderr)
    assert match is not None, done.stderr
    return int(match.group(1))
