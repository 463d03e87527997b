"""Build the optional C fast path of canonical JSON (``toolproof._jcs``).

Everything else about the package is declared in ``pyproject.toml``. The
extension is ``optional``: without a C compiler the build still succeeds and
``toolproof.identity`` uses its exact pure-Python encoder alone.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "toolproof._jcs",
            ["src/toolproof/_jcs.c"],
            depends=["src/toolproof/_jcs_pow5.h"],
            optional=True,
        ),
    ]
)
