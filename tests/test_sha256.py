"""One-shot SHA-256: ``toolproof._jcs.sha256_hex`` (SHA-NI and portable C) and
``toolproof.identity.sha256_hex`` against ``hashlib`` and the FIPS 180-4 vectors."""

from __future__ import annotations

import hashlib
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproof import identity
from toolproof.identity import content_id, digest, sha256_hex

try:
    from toolproof import _jcs
except ImportError:  # the C extension was not built: only the hashlib path is tested
    _jcs = None  # type: ignore[assignment]

Hasher = Callable[[bytes], bytes]

HASHERS: dict[str, Hasher] = {
    "identity": sha256_hex,
    "hashlib_fallback": identity._sha256_hex_hashlib,  # what identity uses without SHA-NI
}
if _jcs is not None:
    HASHERS["c_dispatch"] = _jcs.sha256_hex  # SHA-NI where the CPU has it
    HASHERS["c_portable"] = _jcs.sha256_hex_portable

hashers = pytest.mark.parametrize("hasher", list(HASHERS.values()), ids=list(HASHERS))
needs_c = pytest.mark.skipif(_jcs is None, reason="toolproof._jcs is not built")

# FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf") and the empty message.
VECTORS = [
    (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (
        b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    ),
    (b"a" * 1_000_000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
]

# around the 55/56-byte padding split and the 64-byte blocks, and past the GIL release
LENGTHS = [0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000, 4095, 4096, 1 << 20]


def _expected(data: bytes) -> bytes:
    return hashlib.sha256(data).hexdigest().encode("ascii")


@hashers
@pytest.mark.parametrize(("message", "hex_digest"), VECTORS, ids=["empty", "abc", "448", "1e6a"])
def test_fips_180_4_vectors(hasher: Hasher, message: bytes, hex_digest: str) -> None:
    assert hasher(message) == hex_digest.encode("ascii")


@hashers
@pytest.mark.parametrize("length", LENGTHS)
def test_block_boundary_lengths(hasher: Hasher, length: int) -> None:
    data = bytes((index * 131 + length) & 0xFF for index in range(length))
    result = hasher(data)
    assert type(result) is bytes
    assert len(result) == 64
    assert result == _expected(data)


@settings(max_examples=400, deadline=None)
@given(st.binary(min_size=0, max_size=5000))
def test_agrees_with_hashlib_on_random_bytes(data: bytes) -> None:
    expected = _expected(data)
    for hasher in HASHERS.values():
        assert hasher(data) == expected


@hashers
def test_every_length_up_to_three_blocks(hasher: Hasher) -> None:
    data = bytes(range(256)) * 2
    for length in range(3 * 64 + 1):
        assert hasher(data[:length]) == _expected(data[:length]), length


@hashers
@pytest.mark.parametrize("length", [0, 3, 64, 300, 5000])
def test_any_contiguous_buffer(hasher: Hasher, length: int) -> None:
    data = bytes(index % 251 for index in range(length + 7))
    expected = _expected(data[5 : 5 + length])
    assert hasher(bytearray(data[5 : 5 + length])) == expected
    assert hasher(memoryview(data)[5 : 5 + length]) == expected
    assert hasher(memoryview(bytearray(data))[5 : 5 + length]) == expected


@hashers
@pytest.mark.parametrize("value", ["abc", 3, None, ["a"]], ids=["str", "int", "None", "list"])
def test_non_buffer_is_a_type_error(hasher: Hasher, value: object) -> None:
    with pytest.raises(TypeError):
        hasher(value)  # type: ignore[arg-type]


@hashers
def test_non_contiguous_buffer_is_refused_as_hashlib_does(hasher: Hasher) -> None:
    with pytest.raises(BufferError):
        hashlib.sha256(memoryview(b"abcdef")[::2])
    with pytest.raises(BufferError):
        hasher(memoryview(b"abcdef")[::2])


@needs_c
def test_identity_uses_the_c_hash_exactly_on_sha_ni() -> None:
    assert isinstance(_jcs.SHA_NI, bool)
    assert (identity.sha256_hex is _jcs.sha256_hex) is _jcs.SHA_NI


@needs_c
@pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"), reason="reads cpuinfo"
)
def test_sha_ni_is_detected_as_the_kernel_reports_it() -> None:
    # (a build with -DTOOLPROOF_NO_SHA_NI, the portable code alone, fails here on SHA-NI CPUs)
    text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    flags = next(line for line in text.splitlines() if line.startswith("flags")).split()
    assert _jcs.SHA_NI is ({"sha_ni", "sse4_1", "ssse3"} <= set(flags))


def test_digest_and_content_id_keep_their_bytes() -> None:
    data = b'{"idx":0,"kind":"run_started"}' * 10
    assert digest(data) == "sha256:" + hashlib.sha256(data).hexdigest()
    assert digest(b"abc") == (
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert content_id("call", {"tool": "stock", "args": {}}) == (
        "call_" + hashlib.sha256(b'{"args":{},"tool":"stock"}').hexdigest()
    )
