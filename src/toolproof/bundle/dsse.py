"""Ed25519 keys and DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol v1).

A signature covers the *pre-authentication encoding* of the payload and its type,
exactly as the DSSE protocol defines it::

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

where ``SP`` is one ASCII space and ``LEN`` the ASCII decimal byte length, with no
leading zeros. The envelope is the DSSE JSON form: ``payload`` (standard base64),
``payloadType``, and ``signatures`` (each ``keyid`` and ``sig``, base64).

Keys are Ed25519 (RFC 8032). The private key is a PKCS#8 PEM file readable only by
its owner (mode ``0600``); the public key is a SubjectPublicKeyInfo PEM file beside
it (``KEY.pub``). A key id is ``sha256:<hex>`` of the raw 32-byte public key.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolproof.errors import InputError
from toolproof.identity import digest

__all__ = [
    "PUBLIC_SUFFIX",
    "SIGNATURE_BYTES",
    "Envelope",
    "PublicKey",
    "Signature",
    "SigningKey",
    "generate_key",
    "load_public_key",
    "load_signing_key",
    "pae",
    "parse_envelope",
]

PUBLIC_SUFFIX = ".pub"
SIGNATURE_BYTES = 64
"""The length of an Ed25519 signature (RFC 8032 section 5.1.6), in bytes."""
_PRIVATE_MASK = 0o077
_PUBLIC_MASK = 0o022


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE v1 pre-authentication encoding of ``payload_type`` and ``payload``.

    Args:
        payload_type: the payload's media type (UTF-8 encoded here).
        payload: the payload bytes.

    Returns:
        ``b"DSSEv1 <len(type)> <type> <len(payload)> <payload>"``.

    """
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return digest(raw)


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key and its key id.

    Attributes:
        key_id: ``sha256:<hex>`` of the raw 32-byte public key.
        key: the key.
        path: the file it was read from (``None`` when built in memory).

    """

    key_id: str
    key: Ed25519PublicKey
    path: Path | None = None

    @classmethod
    def of(cls, key: Ed25519PublicKey, path: Path | None = None) -> PublicKey:
        """The :class:`PublicKey` of ``key`` (its key id computed)."""
        return cls(_key_id(key), key, path)

    def pem(self) -> bytes:
        """The key as SubjectPublicKeyInfo PEM."""
        return self.key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        try:
            self.key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class SigningKey:
    """An Ed25519 private key, with its public half.

    Attributes:
        public: the public key (and key id).
        key: the private key.

    """

    public: PublicKey
    key: Ed25519PrivateKey

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032)."""
        return self.key.sign(message)


def generate_key(out: Path) -> SigningKey:
    """Create a new Ed25519 key: ``out`` (private, mode 0600) and ``out.pub`` (public, 0644).

    Neither file may exist; the private key is created with mode 0600 from the start
    (never widened then narrowed).

    Raises:
        InputError: a file exists already, or its directory is missing.

    """
    public_path = out.with_name(out.name + PUBLIC_SUFFIX)
    for path in (out, public_path):
        if path.exists() or path.is_symlink():
            raise InputError(f"key file {path} exists already: not overwritten", path=str(path))
    if not out.parent.is_dir():
        raise InputError(f"key directory {out.parent} does not exist", path=str(out.parent))
    private = Ed25519PrivateKey.generate()
    key = SigningKey(PublicKey.of(private.public_key(), public_path), private)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(pem)
    os.chmod(out, 0o600)  # the umask may have narrowed it further; never wider
    fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as file:
        file.write(key.public.pem())
    return key


def _read_key_file(path: Path, mask: int, rule: str) -> bytes:
    try:
        info = path.stat()
    except OSError as exc:
        raise InputError(f"key file {path}: {exc.strerror}", path=str(path)) from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"key file {path} is not a regular file", path=str(path))
    mode = stat.S_IMODE(info.st_mode)
    if mode & mask:
        raise InputError(
            f"key file {path} has mode {mode:04o}: {rule}", path=str(path), rule=rule, mode=mode
        )
    return path.read_bytes()


def load_signing_key(path: Path) -> SigningKey:
    """Read an Ed25519 private key (PKCS#8 PEM, unencrypted) written by :func:`generate_key`.

    Raises:
        InputError: the file is missing, readable or writable by group or others
            (its mode must be ``0600`` or narrower), or not an Ed25519 private key.

    """
    rule = "a private key must be readable by its owner only (chmod 600)"
    data = _read_key_file(path, _PRIVATE_MASK, rule)
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(
            f"key file {path} is not an unencrypted PEM private key: {exc}", path=str(path)
        ) from None
    if not isinstance(private, Ed25519PrivateKey):
        raise InputError(
            f"key file {path} holds a {type(private).__name__}, not an Ed25519 key",
            path=str(path),
        )
    return SigningKey(PublicKey.of(private.public_key(), path), private)


def load_public_key(path: Path) -> PublicKey:
    """Read an Ed25519 public key (SubjectPublicKeyInfo PEM).

    Raises:
        InputError: the file is missing, writable by group or others (anyone could
            swap the key a verification trusts), or not an Ed25519 public key.

    """
    rule = "a trusted public key must not be writable by group or others (chmod 644)"
    data = _read_key_file(path, _PUBLIC_MASK, rule)
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InputError(
            f"key file {path} is not a PEM public key: {exc}", path=str(path)
        ) from None
    if not isinstance(public, Ed25519PublicKey):
        raise InputError(
            f"key file {path} holds a {type(public).__name__}, not an Ed25519 key",
            path=str(path),
        )
    return PublicKey.of(public, path)


@dataclass(frozen=True)
class Signature:
    """One DSSE signature: the (unauthenticated) key id hint and the signature bytes."""

    keyid: str
    sig: bytes

    def to_json(self) -> dict[str, str]:
        """``{"keyid", "sig"}`` with ``sig`` in standard base64."""
        return {"keyid": self.keyid, "sig": base64.b64encode(self.sig).decode("ascii")}


@dataclass(frozen=True)
class Envelope:
    """A DSSE envelope: payload bytes, payload type and signatures over their PAE.

    Attributes:
        payload: the payload bytes (base64 only in JSON).
        payload_type: the payload's media type.
        signatures: the signatures, in the order they were added.

    """

    payload: bytes
    payload_type: str
    signatures: tuple[Signature, ...] = ()

    def signed_bytes(self) -> bytes:
        """The bytes every signature covers: :func:`pae` of type and payload."""
        return pae(self.payload_type, self.payload)

    def signed_by(self, key: SigningKey) -> Envelope:
        """A copy with ``key``'s signature added (or replacing that key's old one)."""
        signature = Signature(key.public.key_id, key.sign(self.signed_bytes()))
        others = tuple(item for item in self.signatures if item.keyid != signature.keyid)
        return Envelope(self.payload, self.payload_type, (*others, signature))

    def to_json(self) -> dict[str, Any]:
        """The DSSE JSON envelope (``payload`` in standard base64)."""
        return {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [item.to_json() for item in self.signatures],
        }


def _b64(value: object, where: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{where} is not a string")
    text = value.replace("-", "+").replace("_", "/")  # DSSE accepts URL-safe base64 too
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"{where} is not base64 ({exc})") from None


def parse_envelope(document: object) -> Envelope:
    """Read a DSSE JSON envelope.

    Args:
        document: the parsed JSON.

    Raises:
        ValueError: a required field is missing, of the wrong type, or not base64;
            an unknown field is present; or there is no signature. The message
            names the field.

    """
    if not isinstance(document, dict):
        raise ValueError("the envelope is not a JSON object")
    unknown = sorted(set(document) - {"payload", "payloadType", "signatures"})
    if unknown:
        raise ValueError(f"the envelope has unknown fields: {', '.join(unknown)}")
    payload = _b64(document.get("payload"), "payload")
    payload_type = document.get("payloadType")
    if not isinstance(payload_type, str):
        raise ValueError("payloadType is missing or not a string")
    items = document.get("signatures")
    if not isinstance(items, list) or not items:
        raise ValueError("signatures is missing or empty (DSSE requires at least one)")
    signatures = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"keyid", "sig"}:
            raise ValueError(f"signatures[{index}] is not an object of keyid and sig")
        keyid = item.get("keyid", "")
        if not isinstance(keyid, str):
            raise ValueError(f"signatures[{index}].keyid is not a string")
        signatures.append(Signature(keyid, _b64(item.get("sig"), f"signatures[{index}].sig")))
    return Envelope(payload, payload_type, tuple(signatures))
