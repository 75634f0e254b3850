"""Tool results and error codes: what a call returns, always as data, never as an exception.

Each :data:`ErrorCode` is a distinct fact about how a call ended (docs/guide.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias, cast, get_args

from ._json import EMPTY, JSON, FrozenDict, FrozenList, JSONLike, freeze, freeze_object, thaw

DecisionCode: TypeAlias = Literal[
    "UNKNOWN_TOOL",
    "INVALID_ARGS",
    "DENIED",
    "ASK_REJECTED",
    "ASK_CANCELLED",
    "ASK_UNAVAILABLE",
    "CANCELLED",
    "ABORTED_BEFORE_DISPATCH",
    "BLOCKED",
]
"""The codes of a call decided against (step 1's checks, pre-execute, the approver, guards,
the signal before dispatch, post-execute's ``Block``), not of how a body ended."""
OutcomeCode: TypeAlias = Literal[
    "ABORTED",
    "TIMEOUT",
    "TOOL_ERROR",
    "TOOL_UNAVAILABLE",
    "INVALID_OUTPUT",
    "CODE_RUN_FAILED",
    "SUSPENDED",
    "SESSION_EXPIRED",
]
"""The codes of a call that was allowed and dispatched, by how it ended."""
ErrorCode: TypeAlias = Literal[DecisionCode, OutcomeCode]
ERROR_CODES: Final[tuple[ErrorCode, ...]] = get_args(ErrorCode)
DECISION_CODES: Final[frozenset[ErrorCode]] = frozenset(get_args(DecisionCode))

ContentBlock: TypeAlias = Mapping[str, JSON]
"""An MCP-shaped content block, e.g. ``{"type": "text", "text": "..."}``."""

_NO_CONTEXTS: tuple[JSON, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolError:
    """Why a call failed: one of :data:`ERROR_CODES` and a human-readable message."""

    code: ErrorCode
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """The frozen outcome of one call. ``value`` is ``None`` and ``error`` set when ``is_error``."""

    call_id: str
    name: str
    is_error: bool
    content: Sequence[ContentBlock]
    value: JSON = None
    error: ToolError | None = None
    meta: FrozenDict = field(default=EMPTY)
    additional_contexts: tuple[JSON, ...] = _NO_CONTEXTS

    @property
    def text(self) -> str:
        """The text blocks of ``content`` joined by newlines (what a text-only tool result
        in a framework shows the model; images and other blocks are left out)."""
        return text_of(self.content)

    def as_json(self) -> dict[str, JSON]:
        """The whole result as plain, mutable JSON (a copy): ``call_id``, ``name``,
        ``is_error``, ``content``, ``value``, ``error`` (``{code, message}`` or ``None``),
        ``meta``, ``additional_contexts`` (what ``ptc run --json`` prints)."""
        error = self.error
        return {
            "call_id": self.call_id,
            "name": self.name,
            "is_error": self.is_error,
            "content": thaw(self.content),
            "value": thaw(self.value),
            "error": None if error is None else {"code": error.code, "message": error.message},
            "meta": thaw(self.meta),
            "additional_contexts": thaw(self.additional_contexts),
        }


def error_content(message: str) -> Sequence[ContentBlock]:
    """The content of an error result: one text block ``Error: <message>``."""
    block = FrozenDict({"type": "text", "text": f"Error: {message}"})
    return cast(Sequence[ContentBlock], FrozenList([block]))


def error_result(
    call_id: str,
    name: str,
    code: ErrorCode,
    message: str,
    meta: Mapping[str, JSONLike] | None = None,
) -> ToolResult:
    """Build a frozen error result with the standard error content."""
    return ToolResult(
        call_id=call_id,
        name=name,
        is_error=True,
        content=error_content(message),
        error=ToolError(code=code, message=message),
        meta=EMPTY if not meta else freeze_object(dict(meta), "$.meta"),
    )


def freeze_content(content: object) -> Sequence[ContentBlock]:
    """Validate and freeze content: a list of mappings, each with a string ``type``."""
    if not isinstance(content, Sequence) or isinstance(content, str | bytes):
        raise TypeError(f"content must be a list of content blocks, got {type(content).__name__}")
    frozen = freeze(list(content), "$.content")
    assert isinstance(frozen, FrozenList)
    for index, block in enumerate(frozen):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise TypeError(f"content block {index} must be a mapping with a string 'type'")
    return cast(Sequence[ContentBlock], frozen)  # every block was checked above


def text_of(content: Sequence[ContentBlock]) -> str:
    """The text blocks of ``content`` joined by newlines (used for messages built from blocks)."""
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
