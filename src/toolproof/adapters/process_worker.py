"""The process-pool worker: ``python -m toolproof.adapters.process_worker --config FILE``.

:class:`toolproof.backends.process.ProcessPool` starts it; it builds the Toolset
with the composition root (:func:`toolproof.config.build_toolset`) and serves
relocation requests on its stdin/stdout pipes (:func:`toolproof.backends.worker.serve_pipes`).
It is not meant to be run by hand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from toolproof.adapters.telemetry.instrument import instrumented_builder
from toolproof.backends.protocol import MAX_FRAME
from toolproof.backends.worker import serve_pipes
from toolproof.config import build_toolset

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Parse ``--config FILE [--max-result-bytes N]`` and serve until the pool closes the pipe.

    Returns:
        The exit status (see :func:`toolproof.backends.worker.serve_pipes`).

    """
    parser = argparse.ArgumentParser(prog="python -m toolproof.adapters.process_worker")
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--max-result-bytes", type=int, default=MAX_FRAME)
    args = parser.parse_args(argv)
    build = instrumented_builder(build_toolset)  # [telemetry]: the worker's spans
    return serve_pipes(args.config, build, max_result_bytes=args.max_result_bytes)


if __name__ == "__main__":
    sys.exit(main())
