"""No private name of another library anywhere in ``src/``: no allow-list.

The rule, over the ``ast`` of every ``src/toolproof/**/*.py``:

* an import fails when it names a ``_``-prefixed module or object of a module outside
  ``toolproof`` (``from pydantic._internal import x``, ``import httpx._models``,
  ``from httpx import _content``); a dunder module of the standard library
  (``__future__``) is the language's, not private;
* an attribute ``obj._name`` fails unless ``_name`` is toolproof's own (defined in a
  class body, assigned as an attribute, named in ``__slots__``, or, read off a module
  toolproof imports from itself, defined at that module's top level) or a name of
  Python's data model (computed from the builtins' own ``dir()``, the documented
  data-model and ``functools``/``inspect`` names, and the ``_``-names the standard
  library documents on ``namedtuple`` and ``enum``); read off a name imported from
  another library (``httpx.Response._content``, ``BaseModel.__dict__``'s slots), only
  the data model's names pass, and a name the module itself lists in its ``__all__``
  (``os._exit``; ``from m import _x`` likewise);
* ``getattr``/``setattr``/``hasattr``/``delattr``/``__setattr__``/``__getattribute__``
  with a string literal, and ``x.__dict__["..."]``/``vars(x)["..."]``, count as the
  attribute they name.
"""

from __future__ import annotations

import ast
import collections
import enum
import importlib
import sys
import types
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
OWN_PACKAGE = "toolproof"
NAME_CALLS = frozenset(
    {"getattr", "setattr", "hasattr", "delattr", "__setattr__", "__getattribute__", "__delattr__"}
)
"""Calls whose second argument, a string literal, is an attribute name."""

DATA_MODEL = frozenset(
    {
        # the reference's data model (https://docs.python.org/3/reference/datamodel.html)
        "__enter__", "__exit__", "__aenter__", "__aexit__", "__await__", "__aiter__",
        "__anext__", "__iter__", "__next__", "__len__", "__length_hint__", "__getitem__",
        "__setitem__", "__delitem__", "__missing__", "__contains__", "__reversed__",
        "__call__", "__get__", "__set__", "__delete__", "__set_name__", "__slots__",
        "__bool__", "__index__", "__buffer__", "__release_buffer__", "__mro_entries__",
        "__class_getitem__", "__instancecheck__", "__subclasscheck__", "__prepare__",
        "__match_args__", "__all__", "__annotations__", "__type_params__", "__file__",
        "__path__", "__spec__", "__loader__", "__package__", "__builtins__",
        "__traceback__", "__cause__", "__context__", "__notes__", "__suppress_context__",
        "__closure__", "__func__", "__self__", "__objclass__", "__fspath__",
        # the standard library's documented protocol names
        "__wrapped__", "__signature__", "__post_init__", "__copy__", "__deepcopy__",
    }
)  # fmt: skip
"""Dunder names of the language that a builtin's ``dir()`` does not list."""


def _language_names() -> frozenset[str]:
    """The data model's names: :data:`DATA_MODEL` and the ``_``-names of the builtins' ``dir()``."""

    async def coroutine() -> None:
        pass

    async def agen() -> AsyncIterator[None]:
        yield None

    def gen() -> Iterator[None]:
        yield None

    pair = collections.namedtuple("pair", "a")  # its documented _-names
    samples: list[object] = [
        object, type, int, float, complex, str, bytes, bytearray, list, dict, set,
        frozenset, tuple, range, slice, memoryview, property, classmethod, staticmethod,
        BaseException, types.FunctionType, types.ModuleType, types.MethodType,
        types.CodeType, types.SimpleNamespace, types.GeneratorType, types.CoroutineType,
        types.AsyncGeneratorType, types.TracebackType, types.FrameType, pair, pair(1),
        enum.Enum, enum.IntEnum, enum.Flag,
    ]  # fmt: skip
    names = set(DATA_MODEL)
    for sample in samples:
        names.update(name for name in dir(sample) if name.startswith("_"))
    close = coroutine()
    names.update(n for n in dir(close) if n.startswith("_"))
    close.close()
    names.update(n for n in dir(gen()) if n.startswith("_"))
    names.update(n for n in dir(agen()) if n.startswith("_"))
    # enum's documented _sunder_ names (https://docs.python.org/3/library/enum.html)
    names.update({"_name_", "_value_", "_missing_", "_ignore_", "_order_", "_generate_next_value_"})
    return frozenset(names)


LANGUAGE = _language_names()


def _private(name: str) -> bool:
    return name.startswith("_")


def _own_module(module: str) -> bool:
    return module == OWN_PACKAGE or module.startswith(OWN_PACKAGE + ".")


def _stdlib_dunder(component: str) -> bool:
    return component.startswith("__") and component in sys.stdlib_module_names


class Own:
    """What toolproof's own source defines: attribute names, and module top-level names."""

    def __init__(self, trees: Iterable[ast.Module]) -> None:
        self.attributes: set[str] = set()
        self.top_level: set[str] = set()
        for tree in trees:
            self._add(tree)

    def _add(self, tree: ast.Module) -> None:
        for statement in tree.body:
            self.top_level.update(_bound(statement))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    self.attributes.update(_bound(statement))
                    if isinstance(statement, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets
                    ):
                        self.attributes.update(
                            c.value
                            for c in ast.walk(statement.value)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str)
                        )
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.attributes.add(node.attr)
            elif isinstance(node, ast.Call) and _called(node) in {"setattr", "__setattr__"}:
                name = _literal_name(node)
                if name is not None:
                    self.attributes.add(name)


def _bound(statement: ast.stmt) -> set[str]:
    """The names a module- or class-level statement binds."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
        targets = [statement.target]
    elif isinstance(statement, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in statement.names}
    elif isinstance(statement, ast.If | ast.Try):
        inner = statement.body + statement.orelse
        if isinstance(statement, ast.Try):
            inner += statement.finalbody + [s for h in statement.handlers for s in h.body]
        return set().union(*(_bound(s) for s in inner)) if inner else set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _called(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal_name(call: ast.Call) -> str | None:
    """The attribute a ``getattr``-like call names by a string literal (its second argument)."""
    if len(call.args) >= 2:
        arg = call.args[1]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _exported(module: str, name: str) -> bool:
    """Whether module ``module`` lists ``name`` in its ``__all__`` (``os._exit``): public."""
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        return False
    return name in getattr(loaded, "__all__", ())


class _Imports:
    """What a file's imports bind, and the imports that break the rule."""

    def __init__(self, tree: ast.Module, flag: Callable[[ast.AST, str], None]) -> None:
        self.foreign: dict[str, str | None] = {}  # name -> the module it is (None: an object)
        self.mine: set[str] = set()  # names bound by imports from toolproof itself
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self._import(node, flag)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node, flag)

    def _import(self, node: ast.Import, flag: Callable[[ast.AST, str], None]) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            if _own_module(alias.name):
                self.mine.add(bound)
                continue
            self.foreign[bound] = alias.name if alias.asname else alias.name.split(".")[0]
            if any(_private(p) and not _stdlib_dunder(p) for p in alias.name.split(".")):
                flag(node, alias.name)

    def _import_from(self, node: ast.ImportFrom, flag: Callable[[ast.AST, str], None]) -> None:
        module = node.module or ""
        if node.level or _own_module(module):
            self.mine.update(a.asname or a.name for a in node.names)
            return
        if any(_private(p) and not _stdlib_dunder(p) for p in module.split(".")):
            flag(node, module)
            return
        for alias in node.names:
            self.foreign[alias.asname or alias.name] = None
            if _private(alias.name) and not _exported(module, alias.name):
                flag(node, f"{module}.{alias.name}")


def _named_attributes(tree: ast.Module) -> Iterator[tuple[ast.AST, str, ast.expr]]:
    """Every attribute a file reads or writes by name: ``(node, name, the object it is on)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node, node.attr, node.value
        elif isinstance(node, ast.Call) and _called(node) in NAME_CALLS:
            name = _literal_name(node)
            if name is not None:
                yield node, name, node.args[0]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "__dict__":
                yield node, node.slice.value, value.value
            elif isinstance(value, ast.Call) and _called(value) == "vars" and value.args:
                yield node, node.slice.value, value.args[0]


def findings(source: str, where: str, own: Own) -> list[str]:
    """Every ``where:line:name`` of ``source`` breaking the rule (see the module docstring)."""
    tree = ast.parse(source)
    out: list[str] = []

    def flag(node: ast.AST, name: str) -> None:
        out.append(f"{where}:{getattr(node, 'lineno', 0)}:{name}")

    imports = _Imports(tree, flag)
    for node, name, base in _named_attributes(tree):
        if not _private(name) or name in LANGUAGE:
            continue
        root = _root(base)
        root_name = root.id if isinstance(root, ast.Name) else None
        if root_name in imports.foreign:  # read off another library: its public names only
            module = imports.foreign[root_name]
            if not (base is root and module is not None and _exported(module, name)):
                flag(node, name)
        elif name not in own.attributes and not (
            root_name in imports.mine and base is root and name in own.top_level
        ):
            flag(node, name)
    return out


def _sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text("utf-8")) for path in sorted((SRC / OWN_PACKAGE).rglob("*.py"))]


def _own() -> Own:
    return Own(ast.parse(text) for _, text in _sources())


def test_src_uses_no_private_name_of_another_library() -> None:
    own = _own()
    found = [
        hit
        for path, text in _sources()
        for hit in findings(text, str(path.relative_to(SRC.parent)), own)
    ]
    assert not found, "private names of another library in src/:\n" + "\n".join(found)


CAUGHT = [
    ("import httpx\nresponse = httpx.Response(200)\nresponse._content = b''\n", "_content"),
    ("def served(response):\n    response._content = b'x'\n", "_content"),
    ("def served(response):\n    return response._decoder\n", "_decoder"),
    ("from pydantic import TypeAdapter\nTypeAdapter(int)._config\n", "_config"),
    ("def f(adapter):\n    return adapter._config\n", "_config"),
    (
        "from pydantic import BaseModel\nBaseModel.__dict__['__pydantic_fields_set__'].__set__\n",
        "__pydantic_fields_set__",
    ),
    ("def f(m):\n    object.__setattr__(m, '__pydantic_extra__', None)\n", "__pydantic_extra__"),
    ("def f(m):\n    return m.__pydantic_private__\n", "__pydantic_private__"),
    ("def f(m):\n    return vars(m)['__pydantic_fields_set__']\n", "__pydantic_fields_set__"),
    ("def f(x):\n    return getattr(x, '_private', None)\n", "_private"),
    ("from pydantic._internal._config import ConfigWrapper\n", "pydantic._internal._config"),
    ("import pydantic._internal._serializers\n", "pydantic._internal._serializers"),
    ("from httpx import _models\n", "httpx._models"),
    ("import httpx\nhttpx.Response._content\n", "_content"),
    ("from toolproof.tools import hooks\nimport httpx\nhttpx._ACTIVE\n", "_ACTIVE"),
]


def test_the_checker_catches_private_names_of_other_libraries() -> None:
    own = _own()
    for source, name in CAUGHT:
        hits = findings(source, "snippet.py", own)
        assert hits and all(hit.endswith(":" + name) for hit in hits), (source, hits)


PASSED = [
    "from __future__ import annotations\n",
    "class A:\n    def f(self):\n        return self.__class__.__name__, type(self).__qualname__\n",
    "def f(x):\n    with x.__enter__():\n        return x.__wrapped__, x.__dict__\n",
    "class A:\n    __slots__ = ('_mine',)\n    def f(self):\n        return self._mine\n",
    "class A:\n    def f(self):\n        self._inner = 1\n        return self._inner\n",
    "from toolproof.tools import observe\nobserve._CALL\n",
    "def f(p):\n    return p._replace(a=1)._asdict()\n",
    "def f(e):\n    return e._value_\n",
    "import os\nos._exit(0)\n",  # listed in os.__all__
]


def test_the_checker_passes_the_language_and_toolproof_s_own_names() -> None:
    trees = [ast.parse(text) for _, text in _sources()]
    for source in PASSED:
        own = Own([*trees, ast.parse(source)])  # the snippet's own definitions are toolproof's
        assert findings(source, "snippet.py", own) == [], source
