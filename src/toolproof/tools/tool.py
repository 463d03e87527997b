"""``Tool``: a ToolSpec bound to an async body, validated on every call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from toolproof.contract.tools import StackLayer, ToolDescriptor, ToolResult, ToolSpec
from toolproof.errors import CanonicalizationError, ToolBindError, ToolCallError
from toolproof.identity import canonical_json
from toolproof.schema.isolation import IsolatedSchema, ValidationLimitError
from toolproof.schema.limits import INLINE_FANOUT, measure_fanout, needs_isolation
from toolproof.schema.refs import dialect_of
from toolproof.schema.validation import (
    Validator,
    compile_validator,
    count_values,
    json_problem,
    validation_errors,
)
from toolproof.tools import hooks as _hooks
from toolproof.tools.function import DirectCall, ToolOptions, bind_function
from toolproof.tools.observe import note_failure
from toolproof.tools.refusals import (
    not_plain,
    over_limit,
    refusal,
    result_breaks,
    result_not_plain,
)

__all__ = ["MAX_DETAILED_WORK", "MAX_VALIDATION_WORK", "Body", "Tool"]

MAX_VALIDATION_WORK = 1_000_000
"""The most subschema applications (fanout x values in the arguments) one call of a
tool whose fanout exceeds :data:`INLINE_FANOUT` may take; a call over it is refused as
``invalid_arguments`` without being validated (about 50 ms of validation at most)."""

MAX_DETAILED_WORK = 20_000
"""Up to this much work, an invalid call reports up to 8 errors; past it, one (collecting
every error of an ``anyOf`` evaluates all its branches, about 3 us per application)."""


def _noted(result: ToolResult) -> ToolResult:
    """Note ``result``'s failure for an observing runtime; return ``result``."""
    if result.failure is not None:
        note_failure(result.failure)
    return result


_SCALARS: frozenset[type] = frozenset({str, int, bool, type(None)})
"""Result types that are plain JSON by themselves (a float may be NaN: it is checked)."""


def _error_limit(work: int) -> int:
    """Errors to collect: all (8) only while the work is small (each anyOf branch is run)."""
    return 8 if work <= MAX_DETAILED_WORK else 1


Body = Callable[[dict[str, Any]], Awaitable[Any]]
"""An async tool body: takes the validated arguments object, returns (an awaitable of)
a JSON value or a :class:`ToolResult` (passed through as it is, for layers that call
other tools)."""


class Tool:
    """A :class:`ToolSpec` bound to an async body.

    ``await tool.call(arguments)`` validates ``arguments`` against
    ``spec.input_schema`` (draft 2020-12, no coercion) as a step of its own, then
    runs the body and returns a :class:`ToolResult`. It never raises for a bad call
    or a failing body: invalid arguments give ``failure.kind == "invalid_arguments"``
    (the body is not called; arguments that are not plain JSON — a ``Decimal``, a
    tuple, NaN — are invalid too, though the validator alone would take them), an
    exception in the body gives ``"tool_error"``, a non-JSON value or one that breaks
    ``output_schema`` gives ``"invalid_result"``.
    Cancellation (``asyncio.CancelledError``) is never swallowed.

    Args:
        spec: the wire description.
        body: the async body (see :data:`Body`); it receives the caller's object as is.
        source: where the tool came from (``python:mod.fn``, ``mcp:git``), for the descriptor.
        base: for a variant, the base tool's name.
        stack: for a variant, its extension layers, innermost first.
        deterministic: False when identical calls may give different results.
        varies: what varies when not deterministic (``clock``, ``network``...).
        validator: the compiled input validator, when the caller already has one.
        fanout: an upper bound of the subschemas the validator applies to one JSON
            value (:attr:`~toolproof.schema.limits.PreparedSchema.fanout`; measured
            with :func:`~toolproof.schema.limits.measure_fanout` when ``None``); past
            :data:`INLINE_FANOUT` a call whose arguments would cost more than
            :data:`MAX_VALIDATION_WORK` applications is refused before validation.
        output_fanout: the same bound for ``output_schema``; a result over the limit
            is ``invalid_result``.
        direct: how to run a Python function inline (``Tool.from_function`` gives it
            when the function allows it); the result is the same as ``body``'s.
        inner: for a variant, the tool it extends (its next layer inward), as the apply
            site built it; ``None`` for a base tool.
        config: for a variant, its layer's validated config as JSON (``None``: none).

    Raises:
        ToolBindError: the input or output schema does not compile, or breaks a rule
            of :func:`~toolproof.schema.limits.measure_fanout`.

    """

    __slots__ = (
        "_body",
        "_descriptor",
        "_direct",
        "_fanout",
        "_isolated",
        "_output_fanout",
        "_output_isolated",
        "_output_validator",
        "_validator",
        "base",
        "config",
        "deterministic",
        "inner",
        "source",
        "spec",
        "stack",
        "varies",
    )

    def __init__(
        self,
        spec: ToolSpec,
        body: Body,
        *,
        source: str = "",
        base: str | None = None,
        stack: Sequence[StackLayer] = (),
        deterministic: bool = True,
        varies: Sequence[str] = (),
        validator: Validator | None = None,
        fanout: int | None = None,
        output_fanout: int | None = None,
        direct: DirectCall | None = None,
        inner: Tool | None = None,
        config: Any = None,
    ) -> None:
        self.spec = spec
        self._body = body
        self._direct = direct
        self.inner = inner
        self.config = config
        self.source = source
        self.base = base
        self.stack = tuple(stack)
        self.deterministic = deterministic
        self.varies = tuple(varies)
        self._descriptor: ToolDescriptor | None = None
        measured: list[int] = []
        isolated: list[IsolatedSchema | None] = []
        for field, schema, known in (
            ("input_schema", spec.input_schema, fanout),
            ("output_schema", spec.output_schema, output_fanout),
        ):
            try:
                data = canonical_json(schema)  # a schema holding NaN (a float default) is not JSON
            except CanonicalizationError as exc:
                raise ToolBindError(
                    spec.name, field + exc.path[1:], f"not JSON: {exc.rule}"
                ) from exc
            if known is None and type(schema) is dict:
                draft = dialect_of(schema, tool=spec.name, field=field)
                known = measure_fanout(spec.name, field, schema, data, draft)
            measured.append(known or 1)
            heavy = type(schema) is dict and needs_isolation(data, known or 1)
            isolated.append(IsolatedSchema(schema) if heavy else None)
        self._fanout, self._output_fanout = measured
        self._isolated, self._output_isolated = isolated
        try:
            self._validator = validator or compile_validator(spec.input_schema)
        except Exception as exc:
            raise ToolBindError(spec.name, "input_schema", f"does not compile: {exc}") from exc
        self._output_validator: Validator | None = None
        if spec.output_schema is not None:
            try:
                self._output_validator = compile_validator(spec.output_schema)
            except Exception as exc:
                raise ToolBindError(spec.name, "output_schema", f"does not compile: {exc}") from exc

    @property
    def name(self) -> str:
        """The tool's name (``spec.name``)."""
        return self.spec.name

    def descriptor(self) -> ToolDescriptor:
        """Return the :class:`ToolDescriptor` (name, version, fingerprint, stack); cached."""
        if self._descriptor is None:
            self._descriptor = ToolDescriptor.for_spec(
                self.spec,
                source=self.source,
                base=self.base,
                stack=list(self.stack),
                deterministic=self.deterministic,
                varies=list(self.varies),
            )
        return self._descriptor

    def check_arguments(self, arguments: Any) -> ToolResult | None:
        """Validate ``arguments``; return the ``invalid_arguments`` result, or ``None`` if valid.

        A tool whose schema needs isolation (:func:`~toolproof.schema.limits.needs_isolation`)
        validates in a worker process under :func:`~toolproof.schema.isolation.validation_bounds`;
        this synchronous form blocks its thread meanwhile (never past the bounds), while
        :meth:`call` awaits the worker.
        """
        work = self._precheck(arguments)
        if not isinstance(work, int):
            return work
        if self._isolated is not None:
            try:
                found = self._isolated.errors_blocking(arguments, _error_limit(work))
            except (ValidationLimitError, ValueError) as exc:
                return over_limit(self.spec.name, exc, "arguments")
            return refusal(self.spec.name, found)
        problem = None
        try:
            if self._validator.is_valid(arguments):
                return None
        except (ValueError, UnicodeError) as exc:  # a lone surrogate in a key
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            return not_plain(self.spec.name, problem)
        errors = validation_errors(self._validator, arguments, _error_limit(work))
        return refusal(self.spec.name, [(error.pointer, error.message) for error in errors])

    async def _check_isolated(self, isolated: IsolatedSchema, arguments: Any) -> ToolResult | None:
        """:meth:`check_arguments` for an isolated schema, the worker awaited."""
        work = self._precheck(arguments)
        if not isinstance(work, int):
            return work
        try:
            found = await isolated.errors(arguments, _error_limit(work))
        except (ValidationLimitError, ValueError) as exc:
            return over_limit(self.spec.name, exc, "arguments")
        return refusal(self.spec.name, found)

    def _precheck(self, arguments: Any) -> ToolResult | int:
        """Refuse non-object, non-JSON or too costly arguments; else their work (0: small)."""
        if type(arguments) is not dict:
            return ToolResult.fail(
                "invalid_arguments",
                f"invalid arguments for tool {self.spec.name!r}: arguments must be a JSON "
                f"object, not {type(arguments).__name__}",
                where="arguments",
            )
        # plain JSON first: jsonschema-rs raises ValueError on a set, bytes or an object
        problem = json_problem(arguments)
        if problem is not None:
            return not_plain(self.spec.name, problem)
        work = self._work(arguments) if self._fanout > INLINE_FANOUT else 0
        if work > MAX_VALIDATION_WORK:
            return ToolResult.fail(
                "invalid_arguments",
                f"invalid arguments for tool {self.spec.name!r}: validating them could apply "
                f"{work} subschemas, over the limit of {MAX_VALIDATION_WORK} (rule: "
                "MAX_VALIDATION_WORK; the schema applies up to "
                f"{self._fanout} subschemas to each of the {work // self._fanout} values)",
                where="arguments",
                detail={"errors": [{"pointer": "", "message": "validation work over the limit"}]},
            )
        return work

    def _work(self, arguments: Any) -> int:
        """Subschema applications validating ``arguments`` may take, at most."""
        return self._fanout * count_values(arguments)

    async def call(self, arguments: Any) -> ToolResult:
        """Validate ``arguments`` (:meth:`check_arguments`), then run the body.

        Args:
            arguments: the JSON arguments object (a ``dict``), exactly as the caller sent it.

        Returns:
            A :class:`ToolResult`; see the class docstring for the failure kinds.

        """
        isolated = self._isolated
        if isolated is None:
            refused = self.check_arguments(arguments)
        else:
            refused = await self._check_isolated(isolated, arguments)
        if refused is not None:
            return _noted(_hooks.LAYER.refused(self, arguments, refused))
        return await _hooks.LAYER.tool_call(self, arguments, Tool._run)  # run_validated's run

    def run_validated(self, arguments: dict[str, Any]) -> Awaitable[ToolResult]:
        """Run the body on arguments the caller has already validated against this schema.

        Extension layers whose presented schema equals this tool's use it to avoid
        validating twice. Exceptions become ``tool_error`` failures; a body may raise
        :class:`ToolCallError` to report a specific :class:`ToolFailure`. The run goes
        through the telemetry layer (:data:`toolproof.tools.hooks.LAYER`): with
        telemetry on it is one span, off it is the run itself.

        Returns:
            An awaitable of the call's :class:`ToolResult`.

        """
        return _hooks.LAYER.tool_call(self, arguments, Tool._run)

    async def _run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the body (or the inline function) on validated ``arguments``: the one call path.

        A :class:`DirectCall` function is called as ``fn(**arguments)``, an integral
        float for an ``int`` parameter turned into an ``int`` in a copy of the
        caller's dict, and its value goes through the function's result step (what
        the body would do, without its argument handling). Either value is then
        checked by :meth:`_check_result`.

        Raises:
            asyncio.CancelledError: the call was cancelled (never swallowed).

        """
        direct = self._direct
        try:
            if direct is None:
                value: Any = await self._body(arguments)
            else:
                for name in direct.int_params:
                    if type(arguments.get(name)) is float:
                        arguments = {**arguments, name: int(arguments[name])}
                value = direct.finish(await direct.fn(**arguments))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._body_failed(exc)
        if type(value) is ToolResult:
            return _noted(value) if value.failure is not None else value
        isolated = self._output_isolated
        if isolated is None:
            return self._check_result(value)
        return await self._check_result_isolated(isolated, value)

    def _body_failed(self, exc: Exception) -> ToolResult:
        """The failed result of a body that raised ``exc`` (noted for the observer)."""
        if isinstance(exc, ToolCallError):
            note_failure(exc.failure)
            return ToolResult.model_construct(
                schema_version=1, ok=False, value=None, failure=exc.failure
            )
        return _noted(
            ToolResult.fail(
                "tool_error",
                f"tool {self.spec.name!r} raised {type(exc).__name__}: {exc}",
                where="body",
                detail={"exception": f"{type(exc).__module__}.{type(exc).__qualname__}"},
            )
        )

    def _check_result(self, value: Any) -> ToolResult:
        """``value`` as the call's result: plain JSON, valid against ``output_schema``."""
        work = self._result_precheck(value)
        if not isinstance(work, int):
            return work
        validator = self._output_validator
        if validator is None or validator.is_valid(value):
            return ToolResult.success(value)
        errors = validation_errors(validator, value, _error_limit(work))
        return _noted(result_breaks(self.spec.name, [(e.pointer, e.message) for e in errors]))

    async def _check_result_isolated(self, isolated: IsolatedSchema, value: Any) -> ToolResult:
        """:meth:`_check_result` for an output schema that needs isolation, awaited."""
        work = self._result_precheck(value)
        if not isinstance(work, int):
            return work
        try:
            found = await isolated.errors(value, _error_limit(work))
        except (ValidationLimitError, ValueError) as exc:
            return _noted(over_limit(self.spec.name, exc, "output"))
        return _noted(result_breaks(self.spec.name, found)) if found else ToolResult.success(value)

    def _result_precheck(self, value: Any) -> ToolResult | int:
        """The outcome of a non-JSON, unchecked or too costly value; else its work (0: small)."""
        if type(value) not in _SCALARS or (type(value) is str and not value.isascii()):
            problem = json_problem(value)
            if problem is not None:
                return _noted(result_not_plain(self.spec.name, problem))
        if self._output_validator is None:
            return ToolResult.success(value)
        work = (
            self._output_fanout * count_values(value) if self._output_fanout > INLINE_FANOUT else 0
        )
        if work > MAX_VALIDATION_WORK:
            return _noted(
                ToolResult.fail(
                    "invalid_result",
                    f"tool {self.spec.name!r} returned a value whose validation could apply "
                    f"{work} subschemas of its output schema, over the limit of "
                    f"{MAX_VALIDATION_WORK} (rule: MAX_VALIDATION_WORK)",
                    where="output",
                )
            )
        return work

    def rebind(
        self,
        spec: ToolSpec,
        *,
        base: str | None,
        stack: Sequence[StackLayer],
        inner: Tool | None = None,
        config: Any = None,
    ) -> Tool:
        """Return a new tool running this tool's body under ``spec``, ``base`` and ``stack``.

        The extension apply site uses it to give a variant its final name, description,
        output schema and stack without another call layer, and to record the layer's
        ``inner`` tool and ``config`` (JSON) on it. The compiled input validator is
        reused when ``spec.input_schema`` is unchanged.

        Raises:
            ToolBindError: the new input or output schema does not compile.

        """
        same = spec.input_schema == self.spec.input_schema
        return Tool(
            spec,
            self._body,
            source=self.source,
            base=base,
            stack=stack,
            deterministic=self.deterministic,
            varies=self.varies,
            validator=self._validator if same else None,
            # a variant's schema is the inner one reshaped (reserved params added,
            # properties renamed or hidden): the inner bounds carry over
            fanout=self._fanout,
            output_fanout=self._output_fanout,
            direct=self._direct,
            inner=inner,
            config=config,
        )

    def layers(self) -> list[Tool]:
        """Return this tool and the tools inside it, outermost first (``[self, ..., base]``).

        Each variant holds the tool it extends as :attr:`inner` (set by the apply site);
        the last item is the base tool (its ``inner`` is ``None``).
        """
        chain: list[Tool] = []
        tool: Tool | None = self
        while tool is not None:
            chain.append(tool)
            tool = tool.inner
        return chain

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        version: str = "0",
        options: ToolOptions | None = None,
        localns: dict[str, Any] | None = None,
    ) -> Tool:
        """Bind a Python function (sync or async) as a tool.

        See :func:`toolproof.tools.function.bind_function` for the rules and ``Raises:``.
        """
        bound = bind_function(
            fn,
            name=name,
            description=description,
            version=version,
            options=options,
            localns=localns,
        )
        return cls(
            bound.spec,
            bound.body,
            source=bound.source,
            deterministic=bound.deterministic,
            varies=bound.varies,
            validator=bound.validator,
            fanout=bound.fanout,
            direct=bound.direct,
        )

    def __repr__(self) -> str:
        return f"Tool({self.spec.name!r})"
