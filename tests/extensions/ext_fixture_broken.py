"""An extension module that fails to import."""

raise ImportError("fixture module is broken on purpose")
