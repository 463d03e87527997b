"""A recovered run's verification is its recovery's own check pass (issue 34 point 3).

A resume takes, for each segment it just recovered, the verification the recovery's
checks made over the files it wrote (``SessionOutcome.verification``) instead of
verifying the committed run again. Here that verification equals ``verify_run`` of the
committed run, field for field, on a real crash that leaves an executed charge (its key
in ``executed``) and a cut one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from toolproof.runs.finalize import recover_session
from toolproof.verify.verifier import verify_run

AGENT = Path(__file__).with_name("resume_agent.py")


def test_the_recovery_verification_is_verify_run_of_the_committed_run(tmp_path: Path) -> None:
    args = [sys.executable, str(AGENT), str(tmp_path), "record", "charge:A-2:after"]
    killed = subprocess.run(args, capture_output=True, text=True, env=os.environ, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    outcome = asyncio.run(recover_session(tmp_path / "sessions" / "nightly-42"))
    assert outcome.verification is not None
    again = verify_run(outcome.path)
    assert outcome.verification.to_json() == again.to_json()
    assert (outcome.verification.directory, outcome.verification.run_id) == (
        outcome.path,
        outcome.run_id,
    )
    assert outcome.verification.executed == again.executed
    assert [entry[0] for entry in again.executed.values()] == ["charge"]  # A-1; A-2 was cut
    assert outcome.verification.ok
