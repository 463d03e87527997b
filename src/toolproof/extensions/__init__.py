"""Extensions (seed 000): wrappers, transformers and backends that mint named variants."""

from toolproof.extensions.apply import ApplyContext, ComboElement, apply_combos, build_combo
from toolproof.extensions.config import configure_extensions, normalize_combos
from toolproof.extensions.decorators import (
    CallNext,
    ExtensionOptions,
    call_next_for,
    extension,
    register_extension,
    transformer,
    wrapper,
)
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.registry import (
    ENTRY_POINT_GROUP,
    Extension,
    ExtensionRegistry,
    LoadFailure,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ApplyContext",
    "CallNext",
    "ComboElement",
    "Extension",
    "ExtensionKind",
    "ExtensionOptions",
    "ExtensionRegistry",
    "LoadFailure",
    "apply_combos",
    "build_combo",
    "call_next_for",
    "configure_extensions",
    "extension",
    "normalize_combos",
    "register_extension",
    "transformer",
    "wrapper",
]
