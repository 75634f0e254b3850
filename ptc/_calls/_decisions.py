"""Decisions returned by waterfall listeners, and the payloads they receive.

Decisions take their first field positionally: ``Deny("why")``, ``Ask("sure?")``,
``Block("try again")``; everything else is keyword-only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal, TypeAlias

from .._errors import UsageError
from .._json import JSON, JSONLike
from .._results import ContentBlock, ToolResult
from ._tools import ToolExecution


@dataclass(frozen=True, slots=True)
class Allow:
    """Pre-execute: let the call proceed (guards still run)."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Pre-execute: refuse the call (``DENIED``); ``info`` lands in ``result.meta["info"]``."""

    reason: str
    _: KW_ONLY
    info: JSONLike = None


@dataclass(frozen=True, slots=True)
class Cancel:
    """Pre-execute: drop the call without calling it a denial (``CANCELLED``)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """Pre-execute: ask the runtime's approver; only ``"allowed-once"`` lets the call run."""

    reason: str | None = None
    _: KW_ONLY
    display_reason: str | None = None


PreDecision: TypeAlias = Allow | Deny | Cancel | Ask

_UNSET: Any = object()


@dataclass(frozen=True, slots=True, init=False)
class Accept:
    """Post-execute: keep the result, or replace its ``content`` or its ``value`` (not both).

    ``Accept()`` keeps the result unchanged. A replaced value is re-validated against the
    tool's output schema and re-rendered; replacing the value of an error result is a
    listener error.
    """

    content: Sequence[ContentBlock] | None
    value: JSONLike
    has_value: bool

    def __init__(
        self, *, content: Sequence[ContentBlock] | None = None, value: JSONLike = _UNSET
    ) -> None:
        if content is not None and value is not _UNSET:
            raise UsageError("Accept takes content or value, not both")
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "has_value", value is not _UNSET)
        object.__setattr__(self, "value", None if value is _UNSET else value)


@dataclass(frozen=True, slots=True)
class Block:
    """Post-execute: turn the result into a ``BLOCKED`` error with this feedback."""

    feedback: str | Sequence[ContentBlock]


PostDecision: TypeAlias = Accept | Block


@dataclass(frozen=True, kw_only=True, slots=True)
class PostExecute:
    """The payload of ``tools/post-execute``."""

    execution: ToolExecution
    result: ToolResult


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """What the runtime's approver is asked about."""

    execution: ToolExecution
    reason: str | None
    display_reason: str | None


ApprovalAnswer: TypeAlias = Literal[
    "allowed-once", "rejected", "cancelled", "unavailable", "deferred"
]
"""``deferred``: a person will decide later. Inside a ``run_code`` program the run is
suspended (``SUSPENDED``) and resumed with ``scope.resume(token, answer)``; for a direct call
it is ``ASK_UNAVAILABLE``."""
Approver: TypeAlias = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]
"""The runtime's ``approver``: asked when a pre-execute listener answers ``Ask``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DispatchLogEntry:
    """The payload of ``tools/ptc-dispatch-log``: one nested call of a ``run_code`` run."""

    execution: ToolExecution
    sub_call_id: str
    name: str
    arguments: JSON
    is_error: bool
    content: Sequence[ContentBlock]
