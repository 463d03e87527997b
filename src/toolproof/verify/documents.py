"""``spec.json`` and ``plan.json`` read as they come: one member or array item at a time.

A session run's spec has a step per call and its plan a node and an edge per call: a
million calls make each a few hundred MB, and parsing one whole holds several kB a
call. :class:`DocumentReader` reads such a document in blocks instead and hands on
its parts: each top-level member, and each item of the members named as arrays, with
the exact text it was read from (for the canonical comparison), holding one block and
the part being read.

The document must be in canonical form (RFC 8785) to be read this way: no whitespace
between tokens, an object at the top. Anything else stops the reader with
:attr:`DocumentReader.problem` (the document is not canonical, or not JSON).
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.errors import IdentityMismatchError, InputError, validation_problem
from toolproof.identity import canonical_json

__all__ = ["BLOCK_CHARS", "DocumentReader", "ModelStream", "Part"]

BLOCK_CHARS = 1 << 20
"""Bytes read at a time (1 MiB)."""

NOT_CANONICAL = "is not in canonical JSON form (RFC 8785)"


@dataclass(frozen=True)
class Part:
    """One part of a document as read.

    Attributes:
        key: the top-level member's name.
        index: the item's position in that member's array, or ``None`` for a member
            read whole.
        value: the parsed JSON value.
        text: the exact text it was read from.

    """

    key: str
    index: int | None
    value: Any
    text: str


class _Stop(Exception):
    """The document cannot be read on (its problem is the message)."""


class DocumentReader:
    """Reads one JSON document of canonical form in blocks (see the module docstring).

    Args:
        path: the file.
        arrays: the top-level members whose arrays are handed on item by item.
        max_part_chars: the longest part kept; a longer one stops the reader.

    Attributes:
        problem: after :meth:`parts`, why the document could not be read through
            (``None`` when it was).
        skeleton: after :meth:`parts`, the document's text with each array in
            ``arrays`` emptied (``[]``): canonical when the document is, given that
            every item is.

    """

    def __init__(
        self, path: Path, arrays: frozenset[str], *, max_part_chars: int, omit: str = ""
    ) -> None:
        self.path = path
        self.arrays = arrays
        self.max_part_chars = max_part_chars
        self.omit = omit
        self.problem: str | None = None
        self.skeleton = ""
        self.content = hashlib.sha256()
        self._text = ""
        self._at = 0
        self._dropped = 0  # characters consumed and dropped before ``_text``
        self._eof = False
        self._json = json.JSONDecoder()
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._file: Any = None

    def _more(self) -> bool:
        """Read a block onto the text (dropping what was consumed); False at the end."""
        if self._eof:
            return False
        block = self._file.read(BLOCK_CHARS)
        self._dropped += self._at
        self._text = self._text[self._at :] + self._utf8.decode(block, final=not block)
        self._at = 0
        if not block:
            self._eof = True
        if len(self._text) > self.max_part_chars + BLOCK_CHARS:
            raise _Stop(f"has a part longer than {self.max_part_chars} characters")
        return True

    def _char(self) -> str:
        while self._at >= len(self._text):
            if not self._more():
                raise _Stop("ends early (truncated?)")
        return self._text[self._at]

    def _expect(self, chars: str) -> str:
        char = self._char()
        if char not in chars:
            raise _Stop(f"{NOT_CANONICAL}: {char!r} at character {self._dropped + self._at}")
        self._at += 1
        return char

    def _value(self) -> tuple[Any, str]:
        """The next JSON value and its text."""
        while True:
            if self._char() in " \t\r\n":
                where = self._dropped + self._at
                raise _Stop(f"{NOT_CANONICAL}: whitespace at character {where}")
            try:
                value, end = self._json.raw_decode(self._text, self._at)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                raise _Stop(f"is not JSON: {exc.msg}") from None
            if end == len(self._text) and self._more():
                continue  # a number may go on in the next block
            text = self._text[self._at : end]
            self._at = end
            return value, text

    def parts(self) -> Iterator[Part]:
        """Every member and array item in order (see :class:`Part`); then the problem, if any.

        Raises:
            OSError: the file cannot be read.

        """
        skeleton: list[str] = []
        self.content = hashlib.sha256()
        try:
            with self.path.open("rb") as self._file:
                yield from self._members(skeleton)
                if self._at < len(self._text) or (self._more() and self._text):
                    raise _Stop(f"{NOT_CANONICAL}: text after the document")
        except _Stop as stop:
            self.problem = str(stop)
        except UnicodeDecodeError:
            self.problem = "is not UTF-8"
        finally:
            self._file = None
        self.skeleton = "".join(skeleton)

    def _members(self, skeleton: list[str]) -> Iterator[Part]:
        """The members, in order.

        The document's text goes to ``skeleton`` (arrays emptied) and, but for the
        member ``omit``, to :attr:`content` (with the separators it needs).
        """
        feed = self.content.update
        skeleton.append(self._expect("{"))
        feed(b"{")
        fed = False  # a member went into the content: the next one needs a comma
        if self._char() == "}":
            skeleton.append(self._expect("}"))
            feed(b"}")
            return
        while True:
            key, name = self._value()
            if not isinstance(key, str):
                raise _Stop(f"{NOT_CANONICAL}: a member name is not a string")
            skeleton += [name, self._expect(":")]
            kept = key != self.omit
            if kept:
                feed(("," if fed else "").encode() + name.encode() + b":")
                fed = True
            if key in self.arrays and self._char() == "[":
                skeleton.append(self._expect("[") + "]")
                if kept:
                    feed(b"[")
                index = 0
                if self._char() == "]":
                    self._at += 1
                else:
                    while True:
                        value, text = self._value()
                        if kept:
                            feed(("," if index else "").encode() + text.encode())
                        yield Part(key, index, value, text)
                        index += 1
                        if self._expect(",]") == "]":
                            break
                if kept:
                    feed(b"]")
            else:
                value, text = self._value()
                skeleton.append(text)
                if kept:
                    feed(text.encode())
                yield Part(key, None, value, text)
            closing = self._expect(",}")
            skeleton.append(closing)
            if closing == "}":
                feed(b"}")
                return


class ModelStream:
    """A canonical model's document read part by part: its head, then each array item.

    The head is every member but the arrays, validated as ``model`` with those arrays
    empty; each item is validated on its own (``items``, by array name) and compared
    with its canonical form (RFC 8785), and so is the head with the arrays emptied.
    For a content model (``id_kind``), the content id is recomputed from the text
    read, all but the ``id`` member, as it passes. Memory: one block and one part.

    Args:
        path: the file (``spec.json``, ``plan.json``).
        rel: its name in problems.
        model: the document's model (``RunSpec``, ``Plan``).
        items: each array's item validator (a model's ``model_validate`` or a
            ``TypeAdapter``'s ``validate_python``).
        max_part_chars: the longest part read.
        id_kind: the content id's kind for a content model (``plan``), else ``None``.

    Attributes:
        head: after :meth:`read`, the head: the model with the arrays empty (a content
            model's ``id`` is the stored one), or ``None`` when a problem was found.
        problem: after :meth:`read`, why the file is not a valid canonical ``model``.

    """

    def __init__(
        self,
        path: Path,
        rel: str,
        model: Any,
        items: Mapping[str, Callable[[Any], Any]],
        *,
        max_part_chars: int,
        id_kind: str | None = None,
    ) -> None:
        self.path = path
        self.rel = rel
        self.model = model
        self.validators = items
        self.max_part_chars = max_part_chars
        self.id_kind = id_kind
        self.head: Any = None
        self.problem: str | None = None

    def _invalid(self, where: str, message: str) -> str:
        return f"{self.rel} is not a valid {self.model.__name__}: {where}: {message}"

    def read(self) -> Iterator[tuple[str, int, Any]]:
        """Each array item as ``(array name, position, validated item)``, in file order.

        Stops at the first problem (:attr:`problem`); :attr:`head` is set after the
        last item, when none was found.

        Raises:
            OSError: the file cannot be read.

        """
        self.head, self.problem = None, None
        omit = "id" if self.id_kind else ""
        reader = DocumentReader(
            self.path,
            frozenset(self.validators),
            max_part_chars=self.max_part_chars,
            omit=omit,
        )
        members: dict[str, Any] = {}
        for part in reader.parts():
            if part.index is None:
                members[part.key] = part.value
                continue
            try:
                item = self.validators[part.key](part.value)
                shown = item.to_json() if hasattr(item, "to_json") else item
                canonical = canonical_json(shown) == part.text.encode()
            except ValidationError as exc:
                first = validation_problem(exc, empty="(item)")
                self.problem = self._invalid(
                    f"{part.key}.{part.index}.{first.where}", first.message
                )
                return
            except InputError as exc:
                self.problem = self._invalid(f"{part.key}.{part.index}", exc.message)
                return
            if not canonical:
                self.problem = f"{self.rel} {NOT_CANONICAL}"
                return
            yield part.key, part.index, item
        if reader.problem is not None:
            self.problem = f"{self.rel} {reader.problem}"
            return
        self.problem = self._head(members, reader)

    def _head(self, members: dict[str, Any], reader: DocumentReader) -> str | None:
        stored = members.get("id") if self.id_kind else None
        content = {**members, **{name: [] for name in self.validators}}
        if self.id_kind:
            if not isinstance(stored, str):
                return self._invalid("id", "the content id is missing or not a string")
            content["id"] = ""  # the id of the head alone; the document's is checked below
        try:
            head = self.model.model_validate(content)
        except ValidationError as exc:
            first = validation_problem(exc, empty="(document)")
            return self._invalid(first.where, first.message)
        except InputError as exc:
            return self._invalid("(document)", exc.message)
        if self.id_kind:
            head = head.model_copy(update={"id": stored})
        if canonical_json(head.to_json()) != reader.skeleton.encode():
            return f"{self.rel} {NOT_CANONICAL}"
        if self.id_kind:
            computed = f"{self.id_kind}_{reader.content.hexdigest()}"
            if computed != stored:
                mismatch = IdentityMismatchError(self.id_kind, str(stored), computed)
                return f"{self.rel} is not a valid {self.model.__name__}: {mismatch.message}"
        self.head = head
        return None
