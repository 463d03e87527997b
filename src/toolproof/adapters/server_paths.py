"""What a remote client may read of the server's file system in an error: nothing absolute.

The runs HTTP API and ``serve``'s MCP answers go to clients on other machines; a
failure message that names ``/home/ops/deploy/toolproof.toml`` or
``/srv/runs/approvals.db`` tells them how the server is laid out. Before such a
message leaves, every absolute path under a known server location is rewritten to a
label naming the location (longest match first, at path boundaries only, so JSON
pointers such as ``/options/force`` are untouched):

=================================  =============
location                           label
=================================  =============
the artifact root (API)            ``<root>``
the working directory              ``<cwd>``
the home directory                 ``~``
the Python installation and venv   ``<python>``
the temporary directory            ``<tmp>``
=================================  =============

``/home/ops/deploy/toolproof.toml`` with the server started in ``/home/ops/deploy``
reads ``<cwd>/toolproof.toml``. Local output (the CLI, the recorder's own trace of a
run) keeps full paths; what a client is answered is what is recorded for it.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["ServerPaths", "hide_server_paths"]


class ServerPaths:
    """Rewrites absolute server paths in client-bound text to location labels.

    Args:
        extra: ``(path, label)`` pairs besides the process's own locations (the API
            passes ``(settings.root, "<root>")``); a later pair never overrides a longer
            prefix.

    """

    def __init__(self, extra: Iterable[tuple[Path | str, str]] = ()) -> None:
        pairs: dict[str, str] = {}
        for path, label in (
            *extra,
            (Path.cwd(), "<cwd>"),
            (sys.prefix, "<python>"),
            (sys.base_prefix, "<python>"),
            (tempfile.gettempdir(), "<tmp>"),
            (Path.home(), "~"),
        ):
            for spelled in {os.path.abspath(path), os.path.realpath(path)}:
                if spelled != "/" and spelled not in pairs:
                    pairs[spelled] = label
        prefixes = sorted(pairs, key=len, reverse=True)
        self._labels = pairs
        self._pattern = (
            re.compile(
                "(" + "|".join(re.escape(prefix) for prefix in prefixes) + r")(?=[/\s'\":),\]}]|$)"
            )
            if prefixes
            else None
        )

    def hide(self, text: str) -> str:
        """``text`` with every known server location replaced by its label.

        Args:
            text: a message bound for a client.

        Returns:
            The same text, ``/home/ops/deploy/x.toml`` as ``<cwd>/x.toml`` (see the
            module table); text without a known location is returned unchanged.

        """
        if self._pattern is None or "/" not in text:
            return text
        return self._pattern.sub(lambda match: self._labels[match.group(1)], text)


def hide_server_paths(text: str) -> str:
    """:meth:`ServerPaths.hide` with the process's own locations (what ``serve`` answers)."""
    return ServerPaths().hide(text)
