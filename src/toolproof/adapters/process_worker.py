"""The process-pool worker: ``python -m toolproof.adapters.process_worker --config FILE``.

:class:`toolproof.backends.process.ProcessPool` starts it; it builds the Toolset
with the composition root (:func:`toolproof.config.build_toolset`) and serves
relocation requests on its stdin/stdout pipes (:func:`toolproof.backends.worker.serve_pipes`).
It is not meant to be run by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from toolproof.adapters.telemetry.instrument import instrumented_builder
from toolproof.backends.protocol import MAX_FRAME
from toolproof.backends.sandbox_inside import SandboxGuard
from toolproof.backends.worker import serve_pipes
from toolproof.config import build_toolset

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Parse ``--config FILE [--max-result-bytes N] [--sandbox PROFILE]``; serve until EOF.

    ``--sandbox`` (JSON, given by the ``sandbox`` backend) installs a
    :class:`~toolproof.backends.sandbox_inside.SandboxGuard` before the Toolset is built.

    Returns:
        The exit status (see :func:`toolproof.backends.worker.serve_pipes`).

    """
    parser = argparse.ArgumentParser(prog="python -m toolproof.adapters.process_worker")
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--max-result-bytes", type=int, default=MAX_FRAME)
    parser.add_argument("--sandbox", type=json.loads, default=None)
    args = parser.parse_args(argv)
    guard = SandboxGuard(args.sandbox) if args.sandbox is not None else None
    build = instrumented_builder(build_toolset)  # [telemetry]: the worker's spans
    return serve_pipes(args.config, build, max_result_bytes=args.max_result_bytes, guard=guard)


if __name__ == "__main__":
    sys.exit(main())
