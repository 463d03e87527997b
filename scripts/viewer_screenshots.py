"""Write the screenshots of docs/viewer.md: the run page and the compare page.

Usage: ``python scripts/viewer_screenshots.py OUT_DIR`` (needs ``pip install -e '.[dev]'``
and /usr/bin/chromium). Runs the tool-evidence example twice (the second looks up
apples where the first looks up plums), serves the root with ``toolproof view`` and
screenshots ``#/run/A`` and ``#/compare/A/B`` in headless Chromium.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tool-evidence"


def _run(root: Path, spec: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "toolproof", "run", str(spec), "--root", str(root), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return str(json.loads(done.stdout)["run_id"])


def main() -> None:
    """Write ``viewer-run.png`` and ``viewer-compare.png`` into the folder ``argv[1]``."""
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in ("spec.toml", "toolproof.toml", "evidence_tools.py"):
            shutil.copy(EXAMPLE / name, work / name)
        first = _run(work, work / "spec.toml")
        text = (work / "spec.toml").read_text(encoding="utf-8")
        other = text.replace('arguments = { item = "plum" }', 'arguments = { item = "apple" }')
        (work / "other.toml").write_text(other, encoding="utf-8")
        second = _run(work, work / "other.toml")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        server = subprocess.Popen(
            [sys.executable, "-m", "toolproof", "view", "--root", str(work), "--port", str(port)]
        )
        try:
            time.sleep(3)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/#/run/{first}")
                page.wait_for_selector("#app[data-ready=run]")
                page.wait_for_timeout(500)
                page.screenshot(path=str(out / "viewer-run.png"), full_page=True)
                page.goto(f"http://127.0.0.1:{port}/#/compare/{first}/{second}")
                page.wait_for_selector("#app[data-ready=compare]")
                page.screenshot(path=str(out / "viewer-compare.png"), full_page=True)
                browser.close()
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
