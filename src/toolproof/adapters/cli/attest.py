"""``toolproof keygen|attest`` and the signature options of ``toolproof verify``.

``keygen --out KEY`` writes an Ed25519 key pair (``KEY`` mode 0600, ``KEY.pub``);
``attest RUN --key KEY`` signs the in-toto statement about a run into the run's DSSE
envelope beside it (``ROOT/attestations/<run id>.dsse.json``). Exit codes: 0 ok; 1 a
bad key file or argument; 2 the run does not verify, so it is not attested.
"""

from __future__ import annotations

from pathlib import Path

import typer

from toolproof.adapters.cli.app import ToolproofCommand, docs_epilog, emit_json, out_console
from toolproof.adapters.cli.locate import resolve_run
from toolproof.adapters.cli.options import JsonOption, RootOption
from toolproof.errors import VerificationError

__all__ = ["register"]


def _keygen(
    out: Path = typer.Option(..., "--out", help="The private key file to create (KEY.pub beside)."),
    as_json: bool = JsonOption,
) -> None:
    """Create an Ed25519 signing key: KEY (mode 0600) and KEY.pub."""
    from toolproof.bundle.dsse import generate_key

    key = generate_key(out)
    public = f"{out}.pub"
    if as_json:
        emit_json({"key": str(out), "public_key": public, "key_id": key.public.key_id})
        return
    out_console.print(f"private key {out} (mode 0600), public key {public}")
    out_console.print(f"key id {key.public.key_id}")


def _attest(
    run: str = typer.Argument(
        ..., help="A run directory (any path), or a run id or unique prefix of one in ROOT/runs."
    ),
    key: Path = typer.Option(..., "--key", help="The signer's private key (from keygen)."),
    out: Path | None = typer.Option(
        None, "--out", help="Write the envelope here (default ROOT/attestations/RUN.dsse.json)."
    ),
    root: Path = RootOption,
    as_json: bool = JsonOption,
) -> None:
    """Sign a run: an in-toto statement (run id, plan, runtime, report, verdict) in DSSE."""
    from toolproof.bundle.attest import attest_run
    from toolproof.bundle.dsse import load_signing_key
    from toolproof.verify.verifier import OUTER_CHECKS, verify_run

    directory = resolve_run(root, run)
    signing = load_signing_key(key)
    verification = verify_run(directory)
    outer = {check for check, _, _ in OUTER_CHECKS}
    broken = [str(item) for item in verification.failures if item.check in outer]
    if broken:
        raise VerificationError(
            f"run {run} does not verify, so it is not attested: {broken[0]}", path=run
        )
    result = attest_run(directory, signing, out=out)
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
    for name, command in (("keygen", _keygen), ("attest", _attest)):
        app.command(name, cls=ToolproofCommand, epilog=docs_epilog("attestations.md"))(command)
