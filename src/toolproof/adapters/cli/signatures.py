"""The signature options of ``verify``: ``--signer``, ``--attestation``, ``--require-signature``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from toolproof.adapters.cli.app import err_console, out_console

if TYPE_CHECKING:
    from toolproof.bundle.attest import AttestationCheck

__all__ = ["print_signatures", "signature_check"]


def signature_check(
    directory: Path, signers: list[Path], attestations: list[Path], require: bool
) -> AttestationCheck | None:
    """The attestation check ``verify`` runs, or ``None`` when none was asked for.

    Raises:
        InputError: a signer's key file is unusable (exit 1).

    """
    if not signers and not attestations and not require:
        return None
    from toolproof.bundle.attest import check_attestations
    from toolproof.bundle.dsse import load_public_key

    keys = [load_public_key(path) for path in signers]
    return check_attestations(directory, signers=keys, files=attestations, require=require)


def print_signatures(check: AttestationCheck) -> None:
    """Print which keys signed, and every problem, for people."""
    for key_id, files in sorted(check.verified.items()):
        pinned = "" if check.pinned else " (key not pinned: pass --signer to pin it)"
        out_console.print(f"signed by {key_id}{pinned} in {', '.join(files)}")
    for problem in check.problems:
        err_console.print(f"[bold red]FAIL[/] \\[attestation] {escape(problem)}")
