"""``ExtensionKind``: the three extension kinds and the properties generic code reads.

Every kind branches by rename: an extension mints a new, named variant next to
the tool it extends (seed 000). Generic machinery keys off a property of the kind,
never off ``kind is ExtensionKind.WRAPPER``:

===========================  =======  ===========  =======
property                     wrapper  transformer  backend
===========================  =======  ===========  =======
``multiple``                 yes      yes          no
``preserves_schema``         yes      no           no
``declares_schema``          no       yes          no
``preserves_output_shape``   yes      no           yes
``relocates_execution``      no       no           yes
===========================  =======  ===========  =======
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ExtensionKind"]

# multiple, preserves_schema, declares_schema, preserves_output_shape, relocates_execution
_PROPERTIES: dict[str, tuple[bool, bool, bool, bool, bool]] = {
    "wrapper": (True, True, False, True, False),
    "transformer": (True, False, True, False, False),
    "backend": (False, False, False, True, True),
}


class ExtensionKind(StrEnum):
    """The kind of an extension: ``wrapper``, ``transformer`` or ``backend``.

    * ``WRAPPER`` presents the extended tool's input schema unchanged (plus its
      own declared ``reserved_params``) and returns its result shape unchanged.
    * ``TRANSFORMER`` presents its own concrete input schema (never bare
      ``*args/**kwargs``) and may reshape the result.
    * ``BACKEND`` moves the body's execution to another process; at most one per combo.
    """

    WRAPPER = "wrapper"
    TRANSFORMER = "transformer"
    BACKEND = "backend"

    @property
    def multiple(self) -> bool:
        """Whether one combo may hold more than one extension of this kind."""
        return _PROPERTIES[self.value][0]

    @property
    def preserves_schema(self) -> bool:
        """Whether the variant must present its input's schema unchanged, minus reserved params.

        The tool *name* always changes: every extension mints a new name.
        """
        return _PROPERTIES[self.value][1]

    @property
    def declares_schema(self) -> bool:
        """Whether the variant must present its own concrete input schema (declared parameters)."""
        return _PROPERTIES[self.value][2]

    @property
    def preserves_output_shape(self) -> bool:
        """Whether the variant returns its input's result shape (so may inherit its output schema).

        An output-schema concern, distinct from :attr:`preserves_schema` (input schema).
        """
        return _PROPERTIES[self.value][3]

    @property
    def relocates_execution(self) -> bool:
        """Whether the variant runs the body in another process (a worker).

        An extension that ``requires_body_locality`` must then sit *inside* it (earlier
        in the combo), so that its layer travels with the body, by name, to the worker.
        """
        return _PROPERTIES[self.value][4]
