"""The evidence pack: one append per item, read back from it, torn and damaged items found."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolproof.bundle.pack import PACK_HEADER, PackWriter, read_pack
from toolproof.evidence.store import EvidenceStore
from toolproof.identity import digest


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _line(data: bytes) -> bytes:
    return f"{_hex(data)} {len(data)}\n".encode()


def _two_items(path: Path) -> tuple[int, int]:
    writer = PackWriter(path)
    first = writer.append(_hex(b"alpha"), b"alpha")
    second = writer.append(_hex(b"beta gamma"), b"beta gamma")
    writer.close()
    return first, second


def test_items_are_appended_after_the_header_line_each_with_its_digest_and_size(
    tmp_path: Path,
) -> None:
    pack = tmp_path / "evidence.pack"
    first, second = _two_items(pack)
    assert PACK_HEADER == b"toolproof-evidence-pack 1\n"
    assert (first, second) == (26 + 67, 26 + 67 + 5 + 68)
    expected = PACK_HEADER + _line(b"alpha") + b"alpha" + _line(b"beta gamma") + b"beta gamma"
    assert pack.read_bytes() == expected
    contents = read_pack(pack)
    assert contents.items == {_hex(b"alpha"): (93, 5), _hex(b"beta gamma"): (166, 10)}
    assert (contents.end, contents.size, contents.problem) == (176, 176, None)
    assert contents.read(_hex(b"beta gamma")) == b"beta gamma"


def test_a_pack_is_never_overwritten(tmp_path: Path) -> None:
    _two_items(tmp_path / "evidence.pack")
    with pytest.raises(FileExistsError):
        PackWriter(tmp_path / "evidence.pack")


def test_a_torn_last_item_ends_the_sound_part(tmp_path: Path) -> None:
    pack = tmp_path / "evidence.pack"
    _two_items(pack)
    data = pack.read_bytes()
    pack.write_bytes(data[:-3])
    contents = read_pack(pack)
    assert contents.items == {_hex(b"alpha"): (93, 5)}
    assert (contents.end, contents.size) == (98, 173)
    assert contents.problem == (
        f"item 2 at byte 98 (evidence {_hex(b'beta gamma')}): torn: 7 of its 10 bytes"
    )
    pack.write_bytes(data[:130])  # inside the second item's line
    contents = read_pack(pack)
    assert (contents.end, contents.problem) == (
        98,
        "item 2 at byte 98: torn: the file ends inside its line",
    )


def test_an_item_whose_bytes_changed_ends_the_sound_part(tmp_path: Path) -> None:
    pack = tmp_path / "evidence.pack"
    _two_items(pack)
    data = bytearray(pack.read_bytes())
    data[93] = ord("A")  # alpha -> Alpha
    pack.write_bytes(bytes(data))
    contents = read_pack(pack)
    assert (contents.items, contents.end) == ({}, 26)
    assert (
        contents.problem == f"item 1 at byte 26: its bytes do not match its digest {_hex(b'alpha')}"
    )


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        (b"not an item line\n", "item 3 at byte 176: its line is not '<sha256 hex> <size>'"),
        (b"x" * 90, "item 3 at byte 176: its line is not '<sha256 hex> <size>'"),
        (b"ab" * 32 + b" 007\n", "item 3 at byte 176: its line is not '<sha256 hex> <size>'"),
    ],
)
def test_a_malformed_item_line_ends_the_sound_part(
    tmp_path: Path, tail: bytes, problem: str
) -> None:
    pack = tmp_path / "evidence.pack"
    _two_items(pack)
    with pack.open("ab") as file:
        file.write(tail)
    contents = read_pack(pack)
    assert (len(contents.items), contents.end, contents.problem) == (2, 176, problem)


def test_a_file_without_the_header_line_holds_nothing(tmp_path: Path) -> None:
    pack = tmp_path / "evidence.pack"
    pack.write_bytes(b"toolproof-evidence-pack 2\n")
    contents = read_pack(pack)
    assert (contents.items, contents.end, contents.size) == ({}, 0, 26)
    assert contents.problem == "does not start with its header line 'toolproof-evidence-pack 1'"


def test_a_live_store_appends_once_per_digest_and_reads_from_it(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path, live=True)
    record = store.put(b"alpha beta gamma", media_type="text/plain", kind="chunk", step="s")
    again = store.put(b"alpha beta gamma", media_type="text/plain", kind="chunk", step="t")
    other = store.put(b'{"a":1}', media_type="application/json", kind="tool_result", step="u")
    assert again["id"] == record["id"] and again["source"]["step"] == "t"
    assert record["path"] == "evidence/" + _hex(b"alpha beta gamma")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence.pack"]
    size = 26 + len(_line(b"alpha beta gamma")) + 16 + len(_line(b'{"a":1}')) + 7
    assert (store.total_bytes, store.stored_bytes) == (23, size)
    assert (tmp_path / "evidence.pack").stat().st_size == size
    assert store.read(record["id"]) == b"alpha beta gamma"
    assert store.read(other["id"]) == b'{"a":1}'
    support = store.support(record["id"], 6, 10)
    assert (support.start, support.end, support.sha256) == (6, 10, digest(b"beta"))
    found = store.find(record["id"], b"gamma")
    assert found is not None and (found.start, found.end, found.sha256) == (
        11,
        16,
        digest(b"gamma"),
    )
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence.pack"]  # a live one: no index
    assert store.stored_files() == {}
    assert store.read(record["id"]) == b"alpha beta gamma"  # from the file, once closed
    assert store.support(record["id"], 0, 5).sha256 == digest(b"alpha")
    contents = read_pack(tmp_path / "evidence.pack")
    assert (len(contents.items), contents.problem) == (2, None)


def _limited(failing_write: str, then: str) -> str:
    """A child script: a pack store with one item, ``failing_write`` past a 100-byte limit.

    The file-size limit (``RLIMIT_FSIZE``) leaves 100 bytes past the first item, so
    ``failing_write`` fails half way (EFBIG); ``then`` runs after it, with ``before``,
    ``after`` (the pack's sizes around the failure) and ``error`` set, and prints one
    JSON line.
    """
    head = textwrap.dedent(
        """
        import json, os, resource, sys
        from pathlib import Path
        from toolproof.evidence.store import EvidenceStore

        store = EvidenceStore(Path(sys.argv[1]), live=True)
        store.put(b"first", media_type="text/plain", kind="chunk", step="a")
        before = store.stored_bytes
        resource.setrlimit(resource.RLIMIT_FSIZE, (before + 100, resource.RLIM_INFINITY))
        try:
            {failing_write}
        except OSError as exc:
            error = [exc.errno, exc.filename]
        after = os.stat(store.pack.path).st_size
        """
    )
    return head.format(failing_write=failing_write) + textwrap.dedent(then)


_LIMITED = _limited(
    'store.put(b"x" * 1000, media_type="text/plain", kind="chunk", step="b")',
    """
    record = store.put(b"second", media_type="text/plain", kind="chunk", step="c")
    print(json.dumps({"before": before, "after": after, "error": error,
                      "second": store.read(record["id"]).decode()}))
    store.close()
    """,
)


def _run_limited(script: str, tmp_path: Path) -> Any:
    """Run ``script`` (a file-size-limited writer) in a child Python; its JSON line parsed."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_an_append_that_fails_half_way_is_cut_off_and_the_pack_stays_sound(tmp_path: Path) -> None:
    """A real write failure: the file-size limit stops the write after 100 bytes (EFBIG)."""
    before = 26 + len(_line(b"first")) + 5
    assert _run_limited(_LIMITED, tmp_path) == {
        "before": before,
        "after": before,
        "error": [27, str(tmp_path / "evidence.pack")],
        "second": "second",
    }
    contents = read_pack(tmp_path / "evidence.pack")
    assert list(contents.items) == [_hex(b"first"), _hex(b"second")]
    assert contents.problem is None
