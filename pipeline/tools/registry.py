"""The tool registry (name, description, JSON Schema for arguments, the function) and
`run_tool`, which runs one call into a completed, bounded invocation and never raises.

Each tool's arguments are one pydantic model: it gives the JSON Schema agents see and validates
what they send, so schema and validation can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from models.agent import ToolCallRequest, ToolSpec
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from pipeline.errors import ToolArgumentError, UnknownToolError
from pipeline.rules.projection import bound_projection
from pipeline.tools.source import ToolOutput

if TYPE_CHECKING:
    from pipeline.data.source import DataSource

ERROR_CHARS = 300
ArgsT = TypeVar("ArgsT", bound=BaseModel)


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    """One tool: its name, what it does, its argument model and its function."""

    name: str
    description: str
    arguments: type[ArgsT]
    function: Callable[[DataSource, ArgsT], ToolOutput]
    input_schema: dict[str, Any] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_schema", _schema(self.arguments))

    def validate(self, raw: Mapping[str, Any]) -> ArgsT:
        """Validated arguments, or ToolArgumentError naming the first problem."""
        try:
            return self.arguments.model_validate(dict(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            raise ToolArgumentError(
                f"{self.name}: argument {where}: {first['msg']}{more}"
            ) from None

    def run(self, source: DataSource, raw: Mapping[str, Any]) -> ToolOutput:
        """Validate the arguments and call the function."""
        return self.function(source, self.validate(raw))

    def spec(self) -> ToolSpec:
        """The tool as agents see it."""
        return ToolSpec(name=self.name, description=self.description,
                        input_schema=self.input_schema)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Mapping[str, Tool[Any]] | None = None) -> None:
        self._tools: dict[str, Tool[Any]] = dict(tools or {})

    def register(self, tool: Tool[Any]) -> None:
        """Add a tool; a second tool of the same name is an error."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool[Any]:
        """The tool of that name, or UnknownToolError."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(f"unknown tool {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        """Registered names, in order."""
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """Every tool as agents see it."""
        return [tool.spec() for tool in self._tools.values()]


def run_tool(
    registry: ToolRegistry,
    request: ToolCallRequest,
    *,
    source: DataSource,
    max_items: int,
    max_bytes: int,
) -> ToolInvocation:
    """Run the call: READY with EVIDENCE_FOUND or NO_EVIDENCE and a bounded projection, or
    ERROR with a one-line message when anything goes wrong (unknown tool, bad arguments, a tool
    that raises, a result that cannot be projected)."""
    try:
        output = registry.get(request.tool_name).run(source, request.arguments)
        projection = bound_projection(
            output.result, scope=output.scope, max_items=max_items, max_bytes=max_bytes
        )
    except Exception as exc:  # a tool's failure is the call's outcome, never the run's crash
        return ToolInvocation(
            tool_call_id=request.tool_call_id, tool_name=request.tool_name,
            arguments=request.arguments, status=LifecycleStatus.ERROR,
            evidence_status=EvidenceStatus.ERROR, projection=None, error=clean_error(exc),
        )
    return ToolInvocation(
        tool_call_id=request.tool_call_id, tool_name=request.tool_name,
        arguments=request.arguments, status=LifecycleStatus.READY,
        evidence_status=EvidenceStatus.EVIDENCE_FOUND if output.found
        else EvidenceStatus.NO_EVIDENCE,
        projection=projection,
    )


def clean_error(exc: BaseException) -> str:
    """`Type: first line of the message`, bounded; never a traceback."""
    lines = str(exc).strip().splitlines()
    message = f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__
    return message if len(message) <= ERROR_CHARS else message[: ERROR_CHARS - 1] + "…"
