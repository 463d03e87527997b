"""The extension registry: extensions by name, from code, config modules and entry points.

An :class:`Extension` is a factory ``(inner: Tool, *, name: str, config) -> Tool``
registered under a name with a kind, an optional pydantic config model,
``reserved_params`` (wrappers) and ``requires_body_locality``. Plugin packages
register through the entry-point group ``toolproof.extensions``; modules listed in
``[extensions] modules`` register by being imported.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any, TypeAlias

from pydantic import BaseModel, ValidationError

from toolproof.errors import FOREIGN_CODE_ERRORS, ExtensionError, foreign_failure
from toolproof.extensions.kinds import ExtensionKind
from toolproof.identity import digest_json
from toolproof.tools.tool import Tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXTENSION_NAME_RE",
    "Extension",
    "ExtensionRegistry",
    "Factory",
    "LoadFailure",
    "default_registry",
    "normalize_reserved",
]

ENTRY_POINT_GROUP = "toolproof.extensions"
"""The entry-point group plugin packages register extensions under."""

EXTENSION_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")
"""What an extension name must match (it becomes part of variant names)."""


Factory: TypeAlias = Callable[..., Tool]
"""``(inner: Tool, *, name: str, config) -> Tool``: build the variant ``name`` over ``inner``.

``config`` is the validated config model instance, or ``None`` when the extension
has no config model. Extensions registered with ``wants_context=True`` also get
``context=`` (an :class:`toolproof.extensions.apply.ApplyContext`). A factory
refuses with :class:`ExtensionError` (``rule=``); the apply site names the tool
and the combo.
"""


def normalize_reserved(
    value: Mapping[str, Any] | Sequence[str],
) -> Mapping[str, Mapping[str, Any]]:
    """Reserved params as a read-only ``name -> JSON Schema`` map (names alone mean ``{}``)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): dict(v) for k, v in value.items()})
    return MappingProxyType({str(k): {} for k in value})


@dataclass(frozen=True)
class Extension:
    """A registered extension.

    Attributes:
        name: the registered name; variants are named ``<inner>_<name>``.
        kind: its :class:`ExtensionKind`.
        factory: ``(inner, *, name, config) -> Tool``, see :class:`Factory`.
        config: the pydantic model its ``config`` table is validated with, or ``None``
            (then giving a non-empty config is refused).
        reserved_params: parameter name -> JSON Schema of a parameter the variant adds
            to its input schema for the wrapper itself (``timeout_s``); only for kinds
            that preserve the input schema. A sequence of names means ``{}`` schemas.
        requires_body_locality: the layer only works in the process running the body,
            so it must sit inside (before) any relocating extension of the combo.
        version: the extension's version, recorded in each variant's stack.
        description: one line for ``toolproof extensions list``.
        wants_context: the factory also takes ``context=`` (the Toolset, the config file,
            the ``[backends]`` tables): for backends and file-backed wrappers.
        origin: where it was registered from (``builtin``, a module, an entry point).

    Raises:
        ExtensionError: (on construction) a bad name, or reserved params on a kind
            that does not preserve the input schema.

    """

    name: str
    kind: ExtensionKind
    factory: Factory
    config: type[BaseModel] | None = None
    reserved_params: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    requires_body_locality: bool = False
    version: str = "0"
    description: str = ""
    wants_context: bool = False
    origin: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or EXTENSION_NAME_RE.match(self.name) is None:
            raise ExtensionError(
                f"extension name {self.name!r}: must match {EXTENSION_NAME_RE.pattern}",
                extension=str(self.name),
                rule=f"must match {EXTENSION_NAME_RE.pattern}",
            )
        object.__setattr__(self, "kind", ExtensionKind(self.kind))
        object.__setattr__(self, "reserved_params", normalize_reserved(self.reserved_params))
        if self.reserved_params and not self.kind.preserves_schema:
            rule = f"reserved params are for kinds that preserve the input schema, not {self.kind}"
            raise ExtensionError(f"extension {self.name!r}: {rule}", extension=self.name, rule=rule)

    def parse_config(self, raw: Mapping[str, Any] | None) -> tuple[Any, str]:
        """Validate a config table; return ``(config for the factory, config digest)``.

        Raises:
            ExtensionError: config given to an extension without a config model, or
                config failing the model; ``rule`` says which.

        """
        if self.config is None:
            if raw:
                keys = ", ".join(sorted(raw))
                rule = f"extension {self.name!r} takes no config (got keys: {keys})"
                raise ExtensionError(rule, extension=self.name, rule=rule)
            return None, digest_json({})
        try:
            model = self.config.model_validate(dict(raw or {}))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "(config)"
            message = str(first["msg"]).removeprefix("Value error, ")
            rule = f"invalid config for extension {self.name!r}: {where}: {message}"
            raise ExtensionError(rule, extension=self.name, rule=rule) from None
        return model, digest_json(model.model_dump(mode="json"))

    def build(self, inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
        """Call the factory (with ``context=`` when :attr:`wants_context`)."""
        if self.wants_context:
            return self.factory(inner, name=name, config=config, context=context)
        return self.factory(inner, name=name, config=config)

    def to_json(self) -> dict[str, Any]:
        """The listing record of ``toolproof extensions list --json``."""
        return {
            "name": self.name,
            "kind": str(self.kind),
            "version": self.version,
            "description": self.description,
            "config": self.config.model_json_schema() if self.config is not None else None,
            "reserved_params": {k: dict(v) for k, v in self.reserved_params.items()},
            "requires_body_locality": self.requires_body_locality,
            "origin": self.origin,
        }


@dataclass(frozen=True)
class LoadFailure:
    """An extension module or entry point that could not be loaded, and why.

    Attributes:
        name: the module or entry-point name.
        field: where it was listed (``extensions.modules[0]``, an entry point).
        rule: why it failed.

    """

    name: str
    field: str
    rule: str


class ExtensionRegistry:
    """Extensions by name. ``ExtensionRegistry()`` starts with the built-ins.

    Args:
        builtins: register the built-in extensions (retry, timeout, cache, rate_limit,
            audit, args, project).

    """

    def __init__(self, *, builtins: bool = True) -> None:
        self._extensions: dict[str, Extension] = {}
        self._entry_points_loaded = False
        self._entry_point_failures: list[LoadFailure] = []
        if builtins:
            from toolproof.extensions.builtins import BUILTINS

            for ext in BUILTINS:
                self.register(ext)

    def register(self, ext: Extension) -> Extension:
        """Register ``ext``; registering the same object again is a no-op.

        Raises:
            ExtensionError: another extension already has that name.

        """
        known = self._extensions.get(ext.name)
        if known is ext:
            return ext
        if known is not None:
            rule = (
                f"extension {ext.name!r} is already registered (by {known.origin or '?'}); "
                "extension names are unique"
            )
            raise ExtensionError(rule, extension=ext.name, rule=rule)
        self._extensions[ext.name] = ext
        return ext

    def get(self, name: str) -> Extension | None:
        """The extension named ``name``, or ``None``."""
        return self._extensions.get(name)

    def __getitem__(self, name: str) -> Extension:
        ext = self._extensions.get(name)
        if ext is None:
            raise KeyError(f"unknown extension {name!r} (registered: {', '.join(self.names())})")
        return ext

    def __contains__(self, name: object) -> bool:
        return name in self._extensions

    def __iter__(self) -> Iterator[Extension]:
        return iter(self._extensions[name] for name in self.names())

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._extensions)

    def _transaction(self, load: Callable[[], Any]) -> Any:
        before = set(self._extensions)
        try:
            return load()
        except BaseException:
            for name in set(self._extensions) - before:
                del self._extensions[name]
            raise

    def import_module(self, module: str) -> ModuleType:
        """Import a module that registers extensions; on failure nothing it registered stays.

        Raises:
            ExtensionError: the import failed (``rule`` names the exception).

        """
        try:
            loaded: ModuleType = self._transaction(lambda: importlib.import_module(module))
        except FOREIGN_CODE_ERRORS as exc:
            rule = f"cannot import extension module {module!r}: {foreign_failure(exc)}"
            raise ExtensionError(rule, extension=module, rule=rule) from exc
        return loaded

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint) -> None:
        def load() -> None:
            target = ep.load()
            if isinstance(target, Extension):
                self.register(target)
            elif isinstance(target, ModuleType):
                return
            elif callable(target):
                target(self)
            else:
                raise TypeError(
                    f"entry point target is a {type(target).__name__}; expected an Extension, "
                    "a module or a callable taking the registry"
                )

        self._transaction(load)

    def load_entry_points(self) -> tuple[LoadFailure, ...]:
        """Load every ``toolproof.extensions`` entry point once; return the failures.

        An entry point names an :class:`Extension` object, a module (imported; its
        decorators register into the default registry) or a callable
        ``register(registry)``. A failing entry point leaves nothing registered.
        """
        if not self._entry_points_loaded:
            self._entry_points_loaded = True
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                try:
                    self._load_entry_point(ep)
                except FOREIGN_CODE_ERRORS as exc:
                    self._entry_point_failures.append(
                        LoadFailure(
                            ep.name,
                            f"entry point {ENTRY_POINT_GROUP}:{ep.name} = {ep.value}",
                            f"cannot load: {foreign_failure(exc)}",
                        )
                    )
        return tuple(self._entry_point_failures)


_DEFAULT: ExtensionRegistry | None = None


def default_registry() -> ExtensionRegistry:
    """The process-wide registry (built-ins included) that decorators and ``load_toolset`` use."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = ExtensionRegistry()
    return _DEFAULT
