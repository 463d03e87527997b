"""A live segment whose run was committed before a kill: recognised, not committed twice.

Finalizing a live session commits its run (the run directory renamed into
``ROOT/runs/<run_id>``), then removes the live directory
(:mod:`toolproof.runs.finalize`). A process killed between the two leaves both: the
run, and a live directory that looks unfinished. Recovering that directory again
(``record_session(..., resume=True)``, ``serve --resume``, ``toolproof verify
--recover``) would commit a second run of the same segment (a recovered one, with
another run id): an orphan in the session's chain.

So, once the run's manifest is written and before the rename that commits it, the
finalize writes the run id it is about to commit into the live directory's
:data:`COMMIT_FILE` (``{"run_id": ...}``, fsynced). A later finalize or recovery of
that live directory first reads it (:func:`committed_already`): when the run it names
is under ``runs/`` and passes its manifest check, that run *is* the segment's; the live
directory is removed and the run returned, nothing committed again. A marker whose
run is not there (the kill came before the rename) or fails its check is ignored: the
segment is committed as usual, and the marker rewritten.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolproof.bundle.manifest import check_manifest
from toolproof.bundle.rundir import RUNS_DIR, write_file
from toolproof.contract.layout import MANIFEST_FILE, REPORT_FILE
from toolproof.contract.runs import RUN_ID_RE, Report
from toolproof.identity import canonical_json

__all__ = ["COMMIT_FILE", "RECOVERY_FILE", "committed_already", "write_commit_marker"]

RECOVERY_FILE = "recovery.json"
"""The file a recovered session's run carries: what recovery kept and dropped."""

COMMIT_FILE = "commit.json"
"""In a live directory: the run id its finalize was about to commit (see the module)."""


def write_commit_marker(live: Path, run_id: str) -> None:
    """Write ``{"run_id": run_id}`` into ``live``'s :data:`COMMIT_FILE`, fsynced.

    Raises:
        OSError: it cannot be written (the run is then not committed).

    """
    path = live / COMMIT_FILE
    path.unlink(missing_ok=True)  # an earlier attempt's, whose run never landed
    write_file(path, canonical_json({"run_id": run_id}))


def committed_already(live: Path, root: Path) -> tuple[Path, Report, list[str]] | None:
    """The run ``live``'s finalize committed before a kill kept ``live``, or ``None``.

    Returns:
        The run directory :data:`COMMIT_FILE` names, its report and what its recovery
        dropped (its :data:`RECOVERY_FILE`'s ``dropped``; empty for a clean finalize),
        when it is under ``root/runs``, its manifest names that run id and it passes its
        manifest check.

    """
    try:
        marker: Any = json.loads((live / COMMIT_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    run_id = marker.get("run_id") if isinstance(marker, dict) else None
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        return None
    run = Path(root) / RUNS_DIR / run_id
    if not (run / MANIFEST_FILE).is_file():
        return None
    manifest, _, findings = check_manifest(run)
    if manifest is None or manifest.run_id != run_id or findings:
        return None
    try:
        report = Report.model_validate_json((run / REPORT_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    recovery: Any = {}
    if (run / RECOVERY_FILE).is_file():  # covered by the manifest just checked
        recovery = json.loads((run / RECOVERY_FILE).read_bytes())
    dropped = recovery.get("dropped", []) if isinstance(recovery, dict) else []
    return run, report, [str(line) for line in dropped]
