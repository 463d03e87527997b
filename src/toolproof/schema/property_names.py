"""The property-name rule: which declared names a Python parameter or pydantic field can hold.

Below both tool sources that need it: :mod:`toolproof.tools.function` (parameters
that can stay keyword parameters) and :mod:`toolproof.tools.declared` (re-exported
as ``toolproof.declarable_field``), so neither imports the other for it.
"""

from __future__ import annotations

import keyword
from typing import Any

from pydantic import BaseModel

__all__ = ["declarable_field"]

_BASEMODEL_NAMES = frozenset(
    name for name in (*dir(BaseModel), *dir(type(BaseModel))) if not name.startswith("_")
)
"""Public attributes of ``pydantic.BaseModel`` and of its metaclass (``register``, ``mro``)."""


def declarable_field(name: Any) -> bool:
    """Whether ``name`` can be held as it is by a generated Python args model or signature.

    True for a string that is a Python identifier, not a keyword (``class``,
    ``from``), without a leading underscore (pydantic refuses those), outside the
    ``model_`` namespace pydantic reserves, and not an attribute of
    ``pydantic.BaseModel`` or its metaclass (``json``, ``schema``, ``copy``,
    ``register``, ``mro``...), which a field would shadow. Adapters hold every other
    property name under an alias and send the original name on the wire: a name is
    never renamed, and never breaks a binding.

    Args:
        name: a property name from a declared schema (any value; non-strings are False).

    Returns:
        Whether a Python parameter and a pydantic field can carry that name unchanged.

    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        return False
    return not name.startswith(("_", "model_")) and name not in _BASEMODEL_NAMES
