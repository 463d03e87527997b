"""The run viewer in a real browser: headless Chromium (Debian's) driven by Playwright.

``toolproof view`` is started as the real executable over a root holding a good run,
another run and a tampered run; the pages are clicked through as an auditor would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_support import toolproof
from serve_helpers import free_port, spawn

import toolproof as toolproof_lib
from toolproof.bundle.evidence import RunEvidence

pytestmark = [pytest.mark.service, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool-evidence"
CHROMIUM = os.environ.get("TOOLPROOF_CHROMIUM", "/usr/bin/chromium")
BIDI_TASK = "\u202eevil\u202c"
"""Reads as "live" where a right-to-left override is obeyed (the other run's task starts so)."""


def _run(root: Path, spec: Path) -> str:
    done = toolproof("run", str(spec), "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["run_id"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("viewer")
    for name in ("spec.toml", "toolproof.toml", "evidence_tools.py"):
        shutil.copy(EXAMPLE / name, work / name)
    good = _run(work, work / "spec.toml")
    text = (work / "spec.toml").read_text(encoding="utf-8")
    other_text = text.replace('arguments = { item = "plum" }', 'arguments = { item = "apple" }')
    other_text = other_text.replace('task = "How many', f'task = "{BIDI_TASK} How many')
    assert other_text.count(BIDI_TASK) == 1
    (work / "other.toml").write_text(other_text, encoding="utf-8")
    other = _run(work, work / "other.toml")
    (work / "tampered.toml").write_text(text.replace("seed = 7", "seed = 9"), encoding="utf-8")
    tampered = _run(work, work / "tampered.toml")
    claims = json.loads((work / "runs" / tampered / "claims.json").read_bytes())
    support = next(c for c in claims if c["supports"])["supports"][0]
    evidence = work / "runs" / tampered / "evidence.pack"  # the cited byte, where the pack holds it
    cited = RunEvidence.open(work / "runs" / tampered).read(support["evidence"])
    data = bytearray(evidence.read_bytes())
    data[bytes(data).index(cited) + support["start"]] ^= 0x01
    evidence.write_bytes(bytes(data))
    return {
        "root": work,
        "good": good,
        "other": other,
        "tampered": tampered,
        "tampered_file": evidence.relative_to(work / "runs" / tampered).as_posix(),
    }


@pytest.fixture(scope="module")
def viewer(runs: dict[str, Any]) -> Iterator[str]:
    port = free_port()
    args = ["view", "--root", str(runs["root"]), "--port", str(port)]
    with spawn(args, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        message = f"no Chromium at {CHROMIUM} (run .ci/services, or set TOOLPROOF_CHROMIUM)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == []


def _ready(page: Any, what: str) -> None:
    page.wait_for_selector(f"#app[data-ready={what}]", timeout=30_000)


def test_list_then_run_then_evidence_with_the_cited_bytes_highlighted(
    page: Any, viewer: str, runs: dict[str, Any]
) -> None:
    page.goto(viewer + "/")
    _ready(page, "list")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 3
    page.wait_for_function(
        "() => [...document.querySelectorAll('.verdict-cell')]"
        ".every(c => !c.textContent.startsWith('verifying'))"
    )
    verdicts = {
        row.get_attribute("data-run"): row.locator(".verdict-cell").inner_text()
        for row in rows.all()
    }
    assert verdicts[runs["good"]] == "verified"
    assert verdicts[runs["tampered"]].startswith("fails (")
    page.fill("#filter", "fails")
    assert [r.get_attribute("data-run") for r in rows.all() if r.is_visible()] == [runs["tampered"]]
    page.fill("#filter", "")
    page.click(f"tr[data-run={runs['good']}] a.run-link")
    _ready(page, "run")
    assert page.get_attribute("#verdict .verdict", "data-verdict") == "passed"
    assert "strict policy" in page.inner_text("#verdict")
    assert page.locator("#timeline tbody tr").count() == 25
    assert page.locator("#checks tbody tr").count() == 13
    assert page.locator(".badge.ok").count() == 3  # the three validated claims, verified
    link = page.locator("a.evidence-link").first
    target = link.get_attribute("href")
    link.click()
    _ready(page, "evidence")
    assert target is not None
    rel, span = target.split(f"#/evidence/{runs['good']}/")[1].split("@")
    start, end = (int(x) for x in span.split("-"))
    key = RunEvidence.key_of_path(rel)  # an item's name, whatever the run's layout
    assert key is not None
    data = RunEvidence.open(runs["root"] / "runs" / runs["good"]).read(key)
    marked = page.eval_on_selector_all("mark.cited", "els => els.map(e => e.textContent).join('')")
    assert marked == data[start:end].decode("utf-8")
    shown = page.inner_text("#evidence")
    assert "\n" in shown and json.loads(shown) == json.loads(data)  # pretty, same JSON


def test_a_tampered_run_fails_at_the_top_and_its_dependent_claim_says_so(
    page: Any, viewer: str, runs: dict[str, Any]
) -> None:
    page.goto(f"{viewer}/#/run/{runs['tampered']}")
    _ready(page, "run")
    assert page.get_attribute("#verdict .verdict", "data-verdict") == "failed"
    assert runs["tampered_file"] in page.inner_text("#verdict")
    assert page.locator(".badge.ok").count() == 0  # nothing shown as verified
    failing = page.locator(".claim.failing")
    assert failing.count() >= 1
    assert runs["tampered_file"] in failing.first.locator(".depends").inner_text()
    page.goto(f"{viewer}/#/evidence/{runs['tampered']}/{runs['tampered_file']}")
    _ready(page, "evidence")
    assert page.is_visible("#evidence-failing")


def test_the_compare_page_shows_the_first_divergent_event(
    page: Any, viewer: str, runs: dict[str, Any]
) -> None:
    page.goto(f"{viewer}/#/compare/{runs['good']}/{runs['other']}")
    _ready(page, "compare")
    assert page.inner_text("#diff-verdict") == "they differ"
    expected = httpx.get(
        f"{viewer}/v1/diff", params={"a": runs["good"], "b": runs["other"]}, timeout=30
    ).json()
    assert expected["first_event"] is not None
    first = page.inner_text("#first-event")
    assert f"idx\t{expected['first_event']['idx']}" in first
    files = page.inner_text("#files")
    for name, status in expected["files"].items():
        assert f"{name}\t{status}" in files


def test_the_viewer_is_read_only_and_guards_its_host(viewer: str, runs: dict[str, Any]) -> None:
    created = httpx.post(f"{viewer}/v1/runs", json={"spec": {}}, timeout=30)
    assert created.status_code == 405
    assert created.json()["message"] == "the viewer is read-only: POST /v1/runs is not served"
    replay = httpx.post(f"{viewer}/v1/runs/{runs['good']}/replay", timeout=30)
    assert replay.status_code == 405
    verified = httpx.post(f"{viewer}/v1/runs/{runs['good']}/verify", timeout=30)
    assert (verified.status_code, verified.json()["ok"]) == (200, True)
    forged = httpx.get(f"{viewer}/v1/runs", headers={"Host": "evil.example"}, timeout=30)
    assert forged.status_code == 421


def test_off_loopback_the_viewer_needs_a_token(tmp_path: Path) -> None:
    done = toolproof(
        "view", "--root", str(tmp_path), "--host", "0.0.0.0", env={"TOOLPROOF_API_TOKEN": None}
    )
    assert done.returncode == 1
    assert done.stderr == (
        "error: the viewer needs a bearer token off loopback (--host 0.0.0.0): pass "
        "--token-file FILE or set TOOLPROOF_API_TOKEN\n"
    )


def test_with_a_token_the_pages_are_public_and_the_data_is_not(
    tmp_path: Path, runs: dict[str, Any], browser: Any
) -> None:
    token = "viewer-token-0123456789abcdef"
    (tmp_path / "token").write_text(token + "\n", encoding="utf-8")
    port = free_port()
    args = ["view", "--root", str(runs["root"]), "--port", str(port)]
    args += ["--token-file", str(tmp_path / "token")]
    with spawn(args, port):
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(base + "/", timeout=30).status_code == 200
        assert httpx.get(base + "/v1/runs", timeout=30).status_code == 401
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{base}/#token={token}")
        _ready(page, "list")
        assert page.locator("#runs tbody tr").count() == 3
        assert "token" not in page.url
        context.close()


def test_bidi_controls_are_shown_isolated_never_obeyed(
    page: Any, viewer: str, runs: dict[str, Any]
) -> None:
    page.goto(viewer + "/")
    _ready(page, "list")
    cell = page.locator(f"tr[data-run={runs['other']}] td").nth(2)
    controls = cell.locator("span.ctl")
    assert [controls.nth(i).get_attribute("data-cp") for i in range(controls.count())] == [
        "U+202E",
        "U+202C",
    ]
    assert controls.first.evaluate("e => getComputedStyle(e).unicodeBidi") == "isolate"
    assert controls.first.evaluate("e => getComputedStyle(e, '::before').content") == '"[U+202E]"'
    task = cell.evaluate("e => e.textContent")  # the run's exact text is kept
    assert task.startswith(BIDI_TASK + " How many apples")


async def _fetch(i: int) -> str:
    """Return document ``i``."""
    return f"document {i}"


async def _record_many(root: Path, calls: int) -> str:
    toolset = toolproof_lib.Toolset()
    toolset.add(toolproof_lib.Tool.from_function(_fetch, name="fetch"))
    toolset.seal()
    async with toolproof_lib.record_session(toolset, root=root, task="many calls") as s:
        for i in range(calls):
            await s.call("fetch", {"i": i})
    return s.run_id


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("viewer-big")
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        run_id = pool.submit(asyncio.run, _record_many(root, 200)).result()  # 1,006 events
    port = free_port()
    with spawn(["view", "--root", str(root), "--port", str(port)], port):
        yield f"http://127.0.0.1:{port}", run_id


def test_a_big_run_shows_its_first_page_then_pages_in_as_you_scroll(
    page: Any, big: tuple[str, str]
) -> None:
    viewer, run_id = big
    page.goto(f"{viewer}/#/run/{run_id}")
    _ready(page, "timeline")  # the first page is on screen before verification
    rows = page.locator("#timeline tbody tr")
    assert rows.count() == 300
    assert page.inner_text("#timeline-more") == (
        "300 events shown; more load as you scroll (or click)"
    )
    page.locator("#timeline-more").scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelectorAll('#timeline tbody tr').length >= 600")
    _ready(page, "run")
    while page.is_enabled("#timeline-more"):
        shown = rows.count()
        page.click("#timeline-more")
        page.wait_for_function(
            f"() => document.querySelectorAll('#timeline tbody tr').length > {shown}"
        )
    indexes = page.eval_on_selector_all("#timeline tbody tr", "rs => rs.map(r => r.dataset.idx)")
    assert indexes == [str(i) for i in range(1006)]  # every event once, in order
    assert page.inner_text("#timeline-more") == "1006 events"
    assert page.get_attribute("#verdict .verdict", "data-verdict") == "passed"
    assert page.inner_text("#task") == "many calls — 200 tool calls"  # from the summary
