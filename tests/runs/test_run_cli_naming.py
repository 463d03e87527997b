"""First use of the run commands (issue 13): naming runs, listing them, honest output.

Every test drives the ``toolproof`` command line (in process, ``cli_support``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from cli_support import Ran, toolproof

from toolproof.bundle.evidence import RunEvidence
from toolproof.contract.runs import Manifest, ManifestEntry, run_id_for
from toolproof.identity import canonical_json

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tool-evidence"


def _cli(*args: str, cwd: Path | None = None) -> Ran:
    return toolproof(*args, cwd=cwd, env={"COLUMNS": "200"})


def _run(spec: Path, root: Path) -> str:
    ran = _cli("run", str(spec), "--root", str(root), "--json")
    assert ran.returncode == 0, ran.stderr
    return str(json.loads(ran.stdout)["run_id"])


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The tool-evidence example run once: (artifact root, run id)."""
    root = tmp_path_factory.mktemp("example") / "art"
    return root, _run(EXAMPLE / "spec.toml", root)


def _typo_spec(tmp_path: Path) -> Path:
    """The example with a typo in the last claim's cite path (``nope`` for ``note``)."""
    project = tmp_path / "typo"
    shutil.copytree(EXAMPLE, project)
    spec = project / "spec.toml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("steps.plums.value.note", "steps.plums.value.nope"), "utf-8")
    return spec


def test_the_run_id_docs_runs_md_shows_is_the_one_the_example_produces(
    example: tuple[Path, str],
) -> None:
    shown = re.findall(r"toolproof verify (run_[0-9a-f]+) ", (REPO / "docs/runs.md").read_text())
    assert len(shown) == 1 and example[1].startswith(shown[0])
    assert len(shown[0]) == len("run_") + 8


def test_every_command_takes_a_run_directory_anywhere(
    example: tuple[Path, str], tmp_path: Path
) -> None:
    root, run_id = example
    directory = root / "runs" / run_id
    beside = tmp_path / "work"
    beside.mkdir()
    relative = os.path.relpath(directory, beside)
    assert relative.startswith("..")
    for args, cwd in (
        ((str(directory),), None),  # absolute
        ((relative,), beside),  # ../other/runs/run_...
        ((run_id,), directory.parent),  # run_... from inside runs/
    ):
        verified = _cli("verify", *args, "--json", cwd=cwd)
        assert (verified.returncode, json.loads(verified.stdout)["run_id"]) == (0, run_id)
        shown = _cli("show", *args, "--json", cwd=cwd)
        assert (shown.returncode, json.loads(shown.stdout)["run"]) == (0, run_id)
        replayed = _cli("replay", *args, "--json", cwd=cwd)
        assert (replayed.returncode, json.loads(replayed.stdout)["identical"]) == (0, True)
        diffed = _cli("diff", *args, *args, "--json", cwd=cwd)
        assert (diffed.returncode, json.loads(diffed.stdout)["identical"]) == (0, True)


def test_a_unique_prefix_names_a_run_and_an_ambiguous_one_lists_the_candidates(
    example: tuple[Path, str], tmp_path: Path
) -> None:
    root, run_id = example
    for prefix in (run_id[:12], run_id[:12] + "…"):
        verified = _cli("verify", prefix, "-r", str(root), "--json")
        assert (verified.returncode, json.loads(verified.stdout)["run_id"]) == (0, run_id)
    two = tmp_path / "two"
    first = _run(EXAMPLE / "spec.toml", two)
    second = _run(_typo_spec(tmp_path), two)
    ambiguous = _cli("verify", "run_", "--root", str(two))
    names = ", ".join(sorted([first, second]))
    assert ambiguous.returncode == 1
    assert ambiguous.stderr.replace("\n", "") == (
        f"error: run 'run_' is ambiguous: 2 runs in {two}/runs start with it ({names}); "
        "give more of the id"
    )


def test_a_moved_and_renamed_run_directory_verifies_as_its_own_id(
    example: tuple[Path, str], tmp_path: Path
) -> None:
    root, run_id = example
    moved = tmp_path / "somewhere" / "my-run"
    shutil.copytree(root / "runs" / run_id, moved)
    verified = _cli("verify", str(moved))
    assert verified.returncode == 0, verified.stderr
    assert f"verify {run_id} (directory my-run)" in verified.stdout
    assert verified.stdout.splitlines()[-1] == "verified"
    replayed = _cli("replay", str(moved), "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["run_id"] == run_id


def test_runs_list_shows_every_run_newest_first_and_whether_it_verifies(
    tmp_path: Path,
) -> None:
    root = tmp_path / "art"
    older = _run(EXAMPLE / "spec.toml", root)
    newer = _run(_typo_spec(tmp_path), root)
    evidence = root / "runs" / older / "evidence.pack"
    evidence.write_bytes(evidence.read_bytes() + b" ")
    listed = _cli("runs", "list", "--root", str(root), "--json", "--verify")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["runs"]
    task = "How many apples and plums are in stock, and where are the apples kept?"
    assert [(r["run_id"], r["task"], r["outcome"], r["claims"], r["tool_calls"]) for r in rows] == [
        (newer, task, "passed", 4, 3),
        (older, task, "passed", 4, 3),
    ]
    assert [row["verified"] for row in rows] == [True, False]
    human = _cli("runs", "list", "-r", str(root), "--verify")
    lines = human.stdout.splitlines()
    assert lines[0] == f"2 runs in {root}/runs, newest first"
    assert lines[1].startswith(newer[:16] + "…  20") and lines[1].endswith(
        "  passed  4 claims  3 calls  verifies"
    )
    assert lines[3].endswith("  passed  4 claims  3 calls  DOES NOT VERIFY")
    assert lines[2] == f"  {task}"
    empty = _cli("runs", "list", "--root", str(tmp_path / "none"))
    assert (empty.returncode, empty.stdout) == (0, f"no runs under {tmp_path}/none/runs\n")


def test_a_finding_that_counts_is_printed_and_its_row_shows_its_severity(
    tmp_path: Path,
) -> None:
    root = tmp_path / "art"
    ran = _cli("run", str(_typo_spec(tmp_path)), "--root", str(root))
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    summary = lines[next(i for i, line in enumerate(lines) if line.startswith("verification:")) :]
    assert summary[0].startswith("verification: passed (strict policy): 13 checks in order, ")
    assert summary[0].endswith(", 1 finding, 3 tool calls")
    assert re.fullmatch(
        r"  \[grounding\] info claims\.json: claim claim_[0-9a-f]{64} \('\{note\}'\): "
        r"insufficient evidence: steps\.plums\.value\.nope: key 'nope' not found",
        summary[1],
    )
    verified = _cli("verify", "run_", "--root", str(root))
    assert verified.returncode == 0
    rows = {
        line.split("│")[1].strip(): line.split("│")[3].strip()
        for line in verified.stdout.splitlines()
        if line.startswith("│")
    }
    assert (rows["grounding"], rows["schema"]) == ("info", "passed")
    assert "note [grounding] info claims.json: claim claim_" in verified.stdout
    assert verified.stdout.splitlines()[-1] == "verified"
    clean = _cli("run", str(EXAMPLE / "spec.toml"), "--root", str(root))
    assert "13 checks in order, 0 findings, 3 tool calls" in clean.stdout


def test_a_refused_replay_names_the_changed_document_with_both_digests(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    apples = tmp_path / "corpus" / "apples.txt"
    apples.write_bytes(b"Apples grow on trees. Apples are red.\n")
    (tmp_path / "corpus" / "plums.txt").write_bytes(b"Plums are purple fruit.\n")
    (tmp_path / "toolproof.toml").write_text(
        '[[retrieval]]\nname = "retrieve"\ncorpus = "corpus"\n', encoding="utf-8"
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'task = "fruit"\ntoolset = "toolproof.toml"\n[reasoner]\nname = "extractive"\n'
        'min_supports = 1\n[[steps]]\nid = "a"\nkind = "retrieve"\n'
        'params = { query = "apples", top_k = 2 }\n',
        encoding="utf-8",
    )
    run_id = _run(spec, tmp_path)
    old = "sha256:" + hashlib.sha256(apples.read_bytes()).hexdigest()
    apples.write_bytes(b"Apples grow on tall trees.\n")
    new = "sha256:" + hashlib.sha256(apples.read_bytes()).hexdigest()
    config = str(tmp_path / "toolproof.toml")
    refused = _cli("replay", run_id, "-r", str(tmp_path), "-c", config, "--json")
    assert refused.returncode == 2
    message = json.loads(refused.stdout)["message"]
    assert re.fullmatch(
        r"frozen replay refused: the runtime descriptor changed: changed retrieve \(source "
        r"'retrieval:fts5-bm25:sha256:[0-9a-f]{64}' -> 'retrieval:fts5-bm25:sha256:[0-9a-f]{64}'; "
        r"fingerprint sha256:[0-9a-f]{64} -> sha256:[0-9a-f]{64}\); "
        + re.escape(f"retrieve: document apples.txt {old} -> {new}"),
        message,
    )
    assert refused.stderr.replace("\n", "") == f"error: {message}"


def test_show_html_of_a_tampered_run_leads_with_the_verdict_and_a_failing_claim(
    example: tuple[Path, str], tmp_path: Path
) -> None:
    root, run_id = example
    copy = tmp_path / "runs" / run_id
    shutil.copytree(root / "runs" / run_id, copy)
    claims = json.loads((copy / "claims.json").read_bytes())
    evidence = copy / "evidence.pack"  # the cited item's bytes, changed in the pack
    cited = RunEvidence.open(copy).read(claims[1]["supports"][0]["evidence"])
    evidence.write_bytes(evidence.read_bytes().replace(cited, cited.replace(b"12", b"13")))
    page = tmp_path / "page.html"
    shown = _cli("show", str(copy), "--html", str(page))
    assert shown.returncode == 2
    assert shown.stderr.splitlines()[0] == f"wrote {page}"
    html = page.read_text(encoding="utf-8")
    body = html.split("<body>", 1)[1]
    assert body.startswith(
        f"<h1>Claims</h1><p class='run'>{run_id}</p>"
        "<div class='verdict failed'>verification FAILED (strict policy)<ul><li>[manifest] "
    )
    second = body.split("<div class='claim'>")[2]
    assert "<span class='failing'>failing</span> (recorded validated)" in second
    assert "<span class='validated'>" not in second
    clean = tmp_path / "clean.html"
    assert _cli("show", run_id, "-r", str(root), "--html", str(clean)).returncode == 0
    assert "<div class='verdict passed'>verified (strict policy)</div>" in clean.read_text("utf-8")


def test_a_manifest_that_lists_itself_says_so(example: tuple[Path, str], tmp_path: Path) -> None:
    root, run_id = example
    copy = tmp_path / "copy"
    shutil.copytree(root / "runs" / run_id, copy)
    manifest = json.loads((copy / "manifest.json").read_bytes())
    manifest["files"].append({"path": "manifest.json", "size": 1, "digest": "sha256:" + "0" * 64})
    manifest["files"].sort(key=lambda entry: entry["path"])
    entries = [ManifestEntry.model_validate(entry) for entry in manifest["files"]]
    forged = Manifest(run_id=run_id_for(entries), files=entries)
    (copy / "manifest.json").write_bytes(canonical_json(forged.to_json()))
    verified = _cli("verify", str(copy))
    assert verified.returncode == 2
    assert (
        "[manifest] manifest.json: manifest path 'manifest.json' lists the manifest itself "
        "(it lists every other file)" in verified.stderr.replace("\n", "")
    )
    assert "None" not in verified.stderr


def test_show_html_into_a_folder_or_a_missing_folder_is_one_line_and_writes_nothing(
    example: tuple[Path, str], tmp_path: Path
) -> None:
    root, run_id = example
    folder = tmp_path / "pages"
    folder.mkdir()
    into_folder = _cli("show", run_id, "-r", str(root), "--html", str(folder))
    assert into_folder.returncode == 1
    assert into_folder.stderr.replace("\n", "") == (
        f"error: --html {folder}: is a folder; give the page's file name (e.g. run.html)"
    )
    missing = tmp_path / "absent" / "run.html"
    into_missing = _cli("show", run_id, "-r", str(root), "--html", str(missing))
    assert into_missing.returncode == 1
    assert into_missing.stderr.replace("\n", "") == (
        f"error: --html {missing}: folder {missing.parent} does not exist"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pages"]
    assert list(folder.iterdir()) == []
