"""Run specs: TOML or JSON files read into a :class:`RunSpec`; unknown keys refused.

References: anywhere inside a call step's ``arguments``, the object
``{"$ref": "steps.<step id>.value[.<key>|.<index>]..."}`` (exactly that one key) is
replaced, before the call, by that part of the earlier step's result value; the
reference makes the step depend on the referenced one. Keys containing ``.`` cannot
be referenced.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.bundle.paths import path_problem
from toolproof.contract.runs import RunSpec
from toolproof.errors import ConfigError, InputError, RefError, validation_problem
from toolproof.evidence.encoding import parse_ref

__all__ = ["LoadedSpec", "RefError", "iter_refs", "load_spec", "parse_spec", "resolve_refs"]

MAX_SPEC_BYTES = 4 * 1024 * 1024
"""The largest spec file read (4 MiB)."""


@dataclass(frozen=True)
class LoadedSpec:
    """A spec and where it came from.

    Attributes:
        spec: the parsed spec.
        path: the spec file.
        toolset_path: the composition root, resolved against the spec's folder.

    """

    spec: RunSpec
    path: Path
    toolset_path: Path


def _key(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "(top level)"


def parse_spec(raw: Any, file: str = "<spec>") -> RunSpec:
    """Validate a spec document (already parsed from TOML or JSON).

    Raises:
        ConfigError: a key is unknown, missing or wrong, naming the file, the key and the rule;
            a reference is malformed; ``toolset`` is not a relative POSIX path.

    """
    try:
        spec = RunSpec.model_validate(raw)
    except ValidationError as exc:
        first = validation_problem(exc)
        rule = (
            "unknown key (not part of the run spec format)"
            if first.kind == "extra_forbidden"
            else "required key is missing"
            if first.kind == "missing"
            else first.rule
        )
        raise ConfigError(file, _key(first.loc), rule) from None
    problem = path_problem(spec.toolset)
    if problem is not None:
        raise ConfigError(file, "toolset", f"path {spec.toolset!r} {problem}")
    for index, step in enumerate(spec.steps):
        try:
            list(iter_refs(step.arguments))
        except InputError as exc:
            raise ConfigError(file, f"steps[{index}].arguments", exc.message) from None
    return spec


def load_spec(path: str | Path) -> LoadedSpec:
    """Read a spec file: ``.json`` as JSON, anything else as TOML.

    Raises:
        ConfigError: the file is missing or a folder, too large, not TOML/JSON, or not a
            valid spec.

    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except IsADirectoryError:
        raise ConfigError(str(file), "(file)", "is a folder; give the spec file in it") from None
    except OSError as exc:
        raise ConfigError(str(file), "(file)", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise ConfigError(str(file), "(file)", f"larger than {MAX_SPEC_BYTES} bytes")
    try:
        text = data.decode("utf-8")
        raw = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if file.suffix == ".json" else "TOML"
        raise ConfigError(str(file), "(file)", f"not valid {kind}: {exc}") from None
    except RecursionError:  # the parsers recurse per nesting level
        raise ConfigError(
            str(file), "(file)", "nested too deeply to parse (arrays or tables thousands deep)"
        ) from None
    spec = parse_spec(raw, str(file))
    return LoadedSpec(spec, file, file.parent / spec.toolset)


def iter_refs(value: Any) -> Iterator[str]:
    """Every reference string inside ``value``, depth first.

    Iterative: arguments nested however deep (an untrusted caller's) cost a loop, never
    a ``RecursionError``.

    Raises:
        InputError: an object has ``$ref`` next to other keys, or a malformed reference.

    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "$ref" in item:
                ref = item["$ref"]
                if len(item) != 1 or not isinstance(ref, str):
                    raise InputError(
                        "a reference is an object with exactly one key, '$ref', whose value "
                        f"is a string; got keys {sorted(item)}"
                    )
                parse_ref(ref)
                yield ref
                continue
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _follow(value: Any, path: list[str], ref: str) -> Any:
    for segment in path:
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            raise RefError(f"reference {ref!r}: {segment!r} not found in the result", ref=ref)
    return value


def resolve_refs(value: Any, values: Mapping[str, Any]) -> Any:
    """Replace every reference inside ``value`` by the part of a step value it names.

    Args:
        value: the arguments (or any JSON inside them).
        values: the value of each step that finished ok, by step id.

    Raises:
        RefError: the step has no value or the path does not exist in it.

    """
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [None]
    # (source, the container to fill, the key or index to fill in it)
    work: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while work:
        item, into, slot = work.pop()
        if isinstance(item, dict):
            if "$ref" in item and len(item) == 1:
                ref = item["$ref"]
                step, path = parse_ref(ref)
                if step not in values:
                    raise RefError(f"reference {ref!r}: step {step!r} has no value", ref=ref)
                into[slot] = _follow(values[step], path, ref)
                continue
            copy: dict[str, Any] = dict.fromkeys(item)
            into[slot] = copy
            work.extend((child, copy, key) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            items: list[Any] = [None] * len(item)
            into[slot] = items
            work.extend((child, items, index) for index, child in reversed(list(enumerate(item))))
        else:
            into[slot] = item
    return root[0]
