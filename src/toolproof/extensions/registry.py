"""The extension registry: extensions by name, from code, config modules and entry points.

An :class:`~toolproof.extensions.extension.Extension` (defined one floor down, in
``extension.py``, with the built-ins in ``builtins.py``) is registered under its
name. Plugin packages register through the entry-point group
``toolproof.extensions``; modules listed in ``[extensions] modules`` are imported
and every :class:`Extension` they define at module level is registered. The
composition root (:mod:`toolproof.config`) builds the registry it binds from and passes it
down; there is no process-wide registry, and importing a module registers nothing
anywhere: a form only builds the :class:`Extension`, and the root collects it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from toolproof.errors import FOREIGN_CODE_ERRORS, ExtensionError, InputError, foreign_failure
from toolproof.extensions.builtins import BUILTINS
from toolproof.extensions.extension import (
    EXTENSION_NAME_RE,
    Extension,
    Factory,
    normalize_reserved,
)
from toolproof.plugins.loading import ENTRY_POINT_GROUPS, entry_point_names, load_entry_point

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXTENSION_NAME_RE",
    "Extension",
    "ExtensionRegistry",
    "Factory",
    "LoadFailure",
    "normalize_reserved",
]

ENTRY_POINT_GROUP = ENTRY_POINT_GROUPS["extension"]
"""The entry-point group plugin packages register extensions under."""


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
            raise ExtensionError(rule, extension=ext.name)
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
        """Import a module of extensions and register every :class:`Extension` it defines.

        A module-level :class:`Extension` (what the forms return) is registered here
        even when its decorator registered it into another registry (or none); on
        failure nothing the module registered stays.

        Raises:
            ExtensionError: the import failed (``rule`` names the exception).

        """

        def load() -> ModuleType:
            imported = importlib.import_module(module)
            self._collect(imported)
            return imported

        try:
            loaded: ModuleType = self._transaction(load)
        except FOREIGN_CODE_ERRORS as exc:
            rule = f"cannot import extension module {module!r}: {foreign_failure(exc)}"
            raise ExtensionError(rule, extension=module) from exc
        return loaded

    def _collect(self, module: ModuleType) -> None:
        """Register every module-level :class:`Extension` of ``module`` (what the forms built)."""
        for value in vars(module).values():
            if isinstance(value, Extension) and self._extensions.get(value.name) is not value:
                self.register(value)  # defined there, registered elsewhere (or nowhere)

    def _add_entry_point(self, target: object) -> None:
        def load() -> None:
            if isinstance(target, Extension):
                self.register(target)
            elif isinstance(target, ModuleType):
                self._collect(target)
            elif callable(target):
                target(self)
            else:
                raise TypeError(
                    f"entry point target is a {type(target).__name__}; expected an Extension, "
                    "a module or a callable taking the registry"
                )

        self._transaction(load)

    def _load_entry_point(self, name: str) -> LoadFailure | None:
        field = f"entry point {ENTRY_POINT_GROUP}:{name}"
        try:
            loaded = load_entry_point("extension", name)
        except InputError as exc:  # the loader's report; its cause is the foreign exception
            cause = exc.__cause__
            rule = exc.fields["rule"] if cause is None else foreign_failure(cause)
            return LoadFailure(name, f"{field} ({exc.fields['origin']})", f"cannot load: {rule}")
        if loaded is None:  # uninstalled since it was listed
            return None
        target, origin = loaded
        try:
            self._add_entry_point(target)
        except FOREIGN_CODE_ERRORS as exc:
            return LoadFailure(name, f"{field} ({origin})", f"cannot load: {foreign_failure(exc)}")
        return None

    def load_entry_points(self) -> tuple[LoadFailure, ...]:
        """Load every ``toolproof.extensions`` entry point once; return the failures.

        An entry point names an :class:`Extension` object, a module (imported; every
        module-level :class:`Extension` it defines is registered here) or a callable
        ``register(registry)``. Each is loaded by
        :func:`~toolproof.plugins.loading.load_entry_point`, the loader of every plugin
        group. A failing entry point leaves nothing registered.
        """
        if not self._entry_points_loaded:
            self._entry_points_loaded = True
            for name in entry_point_names("extension"):
                failure = self._load_entry_point(name)
                if failure is not None:
                    self._entry_point_failures.append(failure)
        return tuple(self._entry_point_failures)
