"""Work counters for tests that bound work rather than time.

A test that once said "refused in under 0.5 s" says instead how much work the refusal
took: how many validators were compiled (``jsonschema_rs.validator_for``, the one place
a schema is compiled) and how many ``$ref`` lookups the schema checks made
(:meth:`toolproof.schema.refs.RefWalker.lookup`). Counts do not depend on the machine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jsonschema_rs
import pytest

from toolproof.schema.refs import RefWalker


@contextmanager
def schema_work() -> Iterator[Counter[str]]:
    """Count ``"compiled"`` validators and ``"lookups"`` of references inside the block."""
    counts: Counter[str] = Counter()
    compile_validator = jsonschema_rs.validator_for
    lookup = RefWalker.lookup

    def counted_compile(*args: Any, **kwargs: Any) -> Any:
        counts["compiled"] += 1
        return compile_validator(*args, **kwargs)

    def counted_lookup(self: RefWalker, *args: Any, **kwargs: Any) -> Any:
        counts["lookups"] += 1
        return lookup(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonschema_rs, "validator_for", counted_compile)
        patch.setattr(RefWalker, "lookup", counted_lookup)
        yield counts
