"""The main job end to end: the python-docs example answers from real documents."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_support import Ran
from cli_support import toolproof as cli

from toolproof.bundle.evidence import RunEvidence

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python-docs"


def toolproof(*args: str, cwd: Path) -> Ran:
    return cli(*args, cwd=cwd, env={"TOOLPROOF_CACHE": str(cwd / "cache")})


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("python-docs")
    shutil.copy(EXAMPLE / "spec.toml", work / "spec.toml")
    shutil.copy(EXAMPLE / "toolproof.toml", work / "toolproof.toml")
    done = toolproof("corpus", "python-docs", "corpus", cwd=work)
    assert done.returncode == 0, done.stderr
    return work


@pytest.fixture(scope="module")
def run_dir(workspace: Path) -> Path:
    done = toolproof("run", "spec.toml", "--root", ".", "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    return workspace / "runs" / outcome["run_id"]


def claims_of(run_dir: Path) -> list[dict[str, object]]:
    claims = json.loads((run_dir / "claims.json").read_bytes())
    assert isinstance(claims, list)
    return claims


def cited(run_dir: Path, claim: dict[str, object]) -> list[str]:
    texts = []
    for support in claim["supports"]:  # type: ignore[attr-defined]
        data = RunEvidence.open(run_dir).read(support["evidence"])
        texts.append(" ".join(data[support["start"] : support["end"]].decode("utf-8").split()))
    return texts


def test_the_three_questions_are_answered_by_exact_sentences(run_dir: Path) -> None:
    claims = claims_of(run_dir)
    assert [(c["type"], c["status"], len(c["supports"])) for c in claims] == [  # type: ignore[arg-type]
        ("derived", "validated", 2)
    ] * 3
    assert [c["statement"] for c in claims] == [
        'The "nonlocal" statement causes the listed identifiers to refer to previously bound '
        "variables in the nearest enclosing scope excluding globals.",
        'When a "return", "break" or "continue" statement is executed in the "try" suite of a '
        '"try"…"finally" statement, the "finally" clause is also executed '
        "\u2018on the way out.\u2019",
        "*__slots__* allow us to explicitly declare data members (like properties) and deny the "
        'creation of "__dict__" and *__weakref__* (unless explicitly declared in *__slots__* or '
        "available in a parent.)",
    ]
    assert [cited(run_dir, claim)[1] for claim in claims] == [
        'Names listed in a "nonlocal" statement, unlike those listed in a "global" statement, '
        "must refer to pre-existing bindings in an enclosing scope (the scope in which a new "
        "binding should be created cannot be determined unambiguously).",
        'When "continue" passes control out of a "try" statement with a "finally" clause, '
        'that "finally" clause is executed before really starting the next loop cycle.',
        claims[2]["statement"],  # the same sentence, from a second document
    ]
    for claim in claims:
        texts = cited(run_dir, claim)
        assert texts[0] == claim["statement"]
        assert [c["text"] for c in claim["citations"]] == [  # type: ignore[attr-defined]
            RunEvidence.open(run_dir).read(s["evidence"], s["start"], s["end"]).decode("utf-8")
            for s in claim["supports"]  # type: ignore[attr-defined]
        ]


def test_chunk_evidence_pins_its_document(run_dir: Path, workspace: Path) -> None:
    events = [json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()]
    chunks = [
        e["evidence"]
        for e in events
        if e["type"] == "evidence_registered" and e["evidence"]["source"]["kind"] == "chunk"
    ]
    assert len(chunks) == 15
    for record in chunks:
        detail = record["source"]["detail"]
        document = (workspace / "corpus" / detail["document"]).read_bytes()
        stored = RunEvidence.open(run_dir).read(record["id"])
        assert stored == document[detail["document_start"] : detail["document_end"]]
        assert (
            detail["document_digest"]
            == "sha256:" + __import__("hashlib").sha256(document).hexdigest()
        )


def test_the_run_verifies_and_replays_without_the_corpus(run_dir: Path, workspace: Path) -> None:
    assert toolproof("verify", str(run_dir.relative_to(workspace)), cwd=workspace).returncode == 0
    shutil.move(workspace / "corpus", workspace / "corpus-away")
    try:
        done = toolproof("replay", run_dir.name, "--json", cwd=workspace)
    finally:
        shutil.move(workspace / "corpus-away", workspace / "corpus")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["identical"], result["live_calls"]) == (True, 0)


def test_an_altered_pinned_chunk_refuses_replay(
    run_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    copy = workspace / "runs" / "altered"
    shutil.copytree(run_dir, copy)
    try:
        claim = claims_of(copy)[0]
        support = claim["supports"][0]  # type: ignore[index]
        path = copy / "evidence.pack"  # the cited byte, flipped where the pack holds it
        cited = RunEvidence.open(copy).read(support["evidence"])
        data = bytearray(path.read_bytes())
        data[bytes(data).index(cited) + support["start"]] ^= 0x20
        path.write_bytes(bytes(data))
        done = toolproof("replay", "runs/altered", cwd=workspace)
        assert done.returncode == 2
        assert "frozen replay refused" in done.stderr
        assert path.name in done.stderr
    finally:
        shutil.rmtree(copy)


def test_an_unanswerable_question_is_insufficient_evidence(workspace: Path) -> None:
    spec = (workspace / "spec.toml").read_text(encoding="utf-8")
    spec = spec.replace(
        "What does the nonlocal statement do?",
        "What is the airspeed velocity of an unladen swallow?",
    )
    (workspace / "unanswerable.toml").write_text(spec, encoding="utf-8")
    done = toolproof("run", "unanswerable.toml", "--root", ".", "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    run = workspace / "runs" / json.loads(done.stdout)["run_id"]
    first = claims_of(run)[0]
    assert (first["status"], first["supports"], first["statement"]) == (
        "insufficient_evidence",
        [],
        "What is the airspeed velocity of an unladen swallow?",
    )
    assert [c["status"] for c in claims_of(run)[1:]] == ["validated", "validated"]


def test_show_names_document_offsets_and_writes_a_page(run_dir: Path, workspace: Path) -> None:
    page = workspace / "claims.html"
    done = toolproof("show", run_dir.name, "--json", "--html", str(page), cwd=workspace)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    support = shown["claims"][0]["supports"][0]
    origin = support["origin"]
    assert origin["kind"] == "chunk" and origin["document"] == "nonlocal.txt"
    document = (workspace / "corpus" / "nonlocal.txt").read_bytes()
    cited = document[origin["document_start"] : origin["document_end"]]
    assert cited.decode("utf-8") == support["text"]
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert html.count("<mark>") == 6
    assert "<mark>The &quot;nonlocal&quot; statement causes the listed identifiers" in html
    text = toolproof("show", run_dir.name, cwd=workspace)
    assert text.returncode == 0
    assert f"= nonlocal.txt [{origin['document_start']}, {origin['document_end']})" in text.stdout


def test_the_readme_shows_this_run(run_dir: Path) -> None:
    # The README's first screen promises what `toolproof run` prints: keep it true.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.search(r"^run directory: runs/(run_[0-9a-f]+)…$", readme, re.MULTILINE)
    summary = re.search(
        r"^verification: passed \(strict policy\): (\d+) checks in order, 0 findings, "
        r"(\d+) tool calls$",
        readme,
        re.MULTILINE,
    )
    assert shown is not None and summary is not None
    report = json.loads((run_dir / "report.json").read_bytes())
    assert run_dir.name.startswith(shown.group(1))
    assert int(summary.group(1)) == len(report["sequence"])
    assert int(summary.group(2)) == 3
