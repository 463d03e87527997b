"""``toolproof keygen|attest`` and the signature options of ``toolproof verify``.

``keygen --out KEY`` writes an Ed25519 key pair (``KEY`` mode 0600, ``KEY.pub``);
``attest RUN --key KEY`` signs the in-toto statement about a run into the run's DSSE
envelope beside it (``ROOT/attestations/<run id>.dsse.json``). Exit codes: 0 ok; 1 a
bad key file or argument; 2 the run does not verify, so it is not attested.
"""

from __future__ import annotations

from pathlib import Path

import typer

from toolproof.adapters.cli.app import emit_json, fail, out_console
from toolproof.adapters.cli.runs import resolve_run
from toolproof.bundle.attest import attest_run
from toolproof.bundle.dsse import generate_key, load_signing_key
from toolproof.errors import InputError, ToolproofError, VerificationError
from toolproof.verify.verifier import OUTER_CHECKS, verify_run

__all__ = ["register"]

_OUTER = frozenset(check for check, _, _ in OUTER_CHECKS)


def _keygen(
    out: Path = typer.Option(..., "--out", help="The private key file to create (KEY.pub beside)."),
    as_json: bool = typer.Option(False, "--json", help="Print one canonical JSON document."),
) -> None:
    """Create an Ed25519 signing key: KEY (mode 0600) and KEY.pub."""
    try:
        key = generate_key(out)
    except InputError as exc:
        raise fail(exc) from None
    public = f"{out}.pub"
    if as_json:
        emit_json({"key": str(out), "public_key": public, "key_id": key.public.key_id})
        return
    out_console.print(f"private key {out} (mode 0600), public key {public}")
    out_console.print(f"key id {key.public.key_id}")


def _attest(
    run: str = typer.Argument(..., help="A run id or a run directory inside --root."),
    key: Path = typer.Option(..., "--key", help="The signer's private key (from keygen)."),
    out: Path | None = typer.Option(
        None, "--out", help="Write the envelope here (default ROOT/attestations/RUN.dsse.json)."
    ),
    root: Path = typer.Option(Path("."), "--root", help="The artifact root (runs in ROOT/runs)."),
    as_json: bool = typer.Option(False, "--json", help="Print one canonical JSON document."),
) -> None:
    """Sign a run: an in-toto statement (run id, plan, runtime, report, verdict) in DSSE."""
    try:
        directory = resolve_run(root, run)
        signing = load_signing_key(key)
        verification = verify_run(directory)
        broken = [str(item) for item in verification.failures if item.check in _OUTER]
        if broken:
            raise VerificationError(
                f"run {run} does not verify, so it is not attested: {broken[0]}", path=run
            )
        result = attest_run(directory, signing, out=out)
    except ToolproofError as exc:
        raise fail(exc) from None
    if as_json:
        emit_json(result.to_json())
        return
    verdict = result.statement["predicate"]["verdict"]
    out_console.print(
        f"attested {result.statement['subject'][0]['name']} (verdict {verdict}) "
        f"with key {result.key_id}"
    )
    out_console.print(f"envelope {result.path} ({len(result.signatures)} signatures)")


def register(app: typer.Typer) -> None:
    """Add ``keygen`` and ``attest`` to ``app``."""
    app.command("keygen")(_keygen)
    app.command("attest")(_attest)
