"""Base classes of every canonical model: frozen, closed, versioned, content-addressed."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, model_validator

from toolproof.errors import IdentityMismatchError
from toolproof.identity import canonical_json, content_id

__all__ = ["SCHEMA_VERSION", "CanonicalModel", "ContentModel"]

SCHEMA_VERSION = 1
"""The version of the canonical model schemas; bumped on any incompatible change."""


class CanonicalModel(BaseModel):
    """A frozen pydantic model that forbids unknown fields and carries ``schema_version``.

    ``canonical()`` returns its RFC 8785 bytes (``model_dump(mode="json")``, fields
    left at ``None`` included, so the bytes say exactly what the model holds).
    """

    # "constants" keeps NaN/Infinity as floats in model_dump(mode="json"), so canonical()
    # refuses them instead of pydantic's default of writing them silently as null
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=False,
        validate_default=True,
        ser_json_inf_nan="constants",
    )

    schema_version: int = SCHEMA_VERSION

    @model_validator(mode="after")
    def _check_schema_version(self) -> Self:
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {self.schema_version} is not supported (this toolproof reads "
                f"version {SCHEMA_VERSION})"
            )
        return self

    def to_json(self) -> dict[str, Any]:
        """Return the model as plain JSON (``dict``) in canonical field form."""
        return self.model_dump(mode="json")

    def canonical(self) -> bytes:
        """Return the RFC 8785 canonical JSON bytes of the model."""
        return canonical_json(self.to_json())


class ContentModel(CanonicalModel):
    """A canonical model with a content id ``<ID_KIND>_<hex>`` in its ``id`` field.

    The id is computed from the canonical JSON of every other field. Given on
    input (a model read back from disk), it is recomputed and compared: a mismatch
    raises :class:`toolproof.errors.IdentityMismatchError` naming both ids.
    """

    ID_KIND: ClassVar[str] = "content"

    id: str = ""

    @model_validator(mode="after")
    def _check_id(self) -> Self:
        computed = content_id(self.ID_KIND, self.model_dump(mode="json", exclude={"id"}))
        if not self.id:
            object.__setattr__(self, "id", computed)
        elif self.id != computed:
            raise IdentityMismatchError(self.ID_KIND, self.id, computed)
        return self
