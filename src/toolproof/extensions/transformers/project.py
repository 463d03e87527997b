"""``project``: reshape a tool's successful result with a JMESPath expression.

JMESPath (https://jmespath.org/specification.html) through the ``jmespath``
library. The variant presents the inner input schema and declares its own output
schema (``{}``, any JSON, unless given).
"""

from __future__ import annotations

from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import Field

from toolproof.contract.tools import ToolResult
from toolproof.errors import ExtensionError
from toolproof.extensions.wrappers.common import StrictConfig
from toolproof.tools.tool import Tool

__all__ = ["ProjectConfig", "project_factory"]


class ProjectConfig(StrictConfig):
    """Config of ``project``.

    Attributes:
        expression: the JMESPath expression applied to the successful result value.
        output_schema: the JSON Schema of the projected value (default ``{}``: any JSON).
        description: a new tool description (empty: keep the inner one).

    """

    expression: str = Field(min_length=1)
    output_schema: dict[str, Any] = Field(default_factory=dict)
    description: str = ""


def project_factory(inner: Tool, *, name: str, config: Any) -> Tool:
    """Build the ``project`` variant of ``inner``; see :class:`ProjectConfig`.

    Failures pass through unchanged; a projected value that breaks the declared
    output schema is an ``invalid_result`` failure.

    Raises:
        ExtensionError: the expression does not compile.

    """
    cfg: ProjectConfig = config
    try:
        compiled = jmespath.compile(cfg.expression)
    except JMESPathError as exc:
        rule = f"project: expression {cfg.expression!r} is not valid JMESPath: {exc}"
        raise ExtensionError(rule) from exc
    run = inner.run_validated

    async def body(arguments: dict[str, Any]) -> Any:
        result: ToolResult = await run(arguments)
        if not result.ok:
            return result
        return compiled.search(result.value)

    spec = inner.spec.model_copy(
        update={
            "name": name,
            "output_schema": dict(cfg.output_schema),
            "description": cfg.description or inner.spec.description,
        }
    )
    return Tool(spec, body)
