"""Descriptor stability: an extension's identity computed in another process.

Each helper builds the identity (a canonical JSON digest) in this process and in a
fresh interpreter started with another ``PYTHONHASHSEED``; they must be equal,
or the extension's identity depends on set order, ids, time or randomness, and no
run that uses it can be replayed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from toolproof.contract.runs import CheckSpec, ReasonerSpec
from toolproof.identity import digest_json
from toolproof.testing.errors import ConformanceError

__all__ = ["assert_identity_stable", "identity_of"]

_SCRIPT = """
import json, sys
from toolproof.testing.identity import identity_of
print(identity_of(json.loads(sys.argv[1])))
"""


def identity_of(target: dict[str, Any]) -> str:
    """The identity digest of an extension named by ``target``.

    Args:
        target: ``{"reasoner": <ReasonerSpec JSON>}``, ``{"check": <CheckSpec JSON>}`` or
            ``{"tool": "module:attr"}`` (a :class:`~toolproof.Tool`, or a zero-argument
            callable returning one).

    Returns:
        ``sha256:<hex>`` of the extension's descriptor.

    Raises:
        InputError: the extension cannot be built.

    """
    if "reasoner" in target:
        from toolproof.evidence.builtin_reasoners import reasoner_registry

        spec = ReasonerSpec.model_validate(target["reasoner"])
        return digest_json(reasoner_registry().create(spec).descriptor().to_json())
    if "check" in target:
        from toolproof.verify.sequence import CheckRegistry, check_for

        _, descriptor = check_for(CheckSpec.model_validate(target["check"]), CheckRegistry())
        return digest_json(descriptor.to_json())
    import importlib

    from toolproof.tools.tool import Tool

    module, _, attr = str(target["tool"]).partition(":")
    value = getattr(importlib.import_module(module), attr)
    tool = value if isinstance(value, Tool) else value()
    return digest_json(tool.descriptor().to_json())


def assert_identity_stable(target: dict[str, Any], *, hash_seed: int = 12345) -> str:
    """Assert ``target``'s identity is the same here and in a fresh process.

    Args:
        target: see :func:`identity_of`.
        hash_seed: the other process's ``PYTHONHASHSEED``.

    Returns:
        The identity digest.

    Raises:
        ConformanceError: ``kit:descriptor-stable`` when the digests differ or the other
            process cannot build it.

    """
    here = identity_of(target)
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(target)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    there = done.stdout.strip()
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ConformanceError(
            "kit:descriptor-stable",
            f"{target}: another process could not build the descriptor: {tail[0]}",
        )
    if there != here:
        raise ConformanceError(
            "kit:descriptor-stable",
            f"{target}: descriptor digest {here} here but {there} in a process with "
            f"PYTHONHASHSEED={hash_seed}; an identity must not depend on hashing, ids, time "
            "or randomness",
        )
    return here
