"""What the adapters share: what they take (a scope, or a session of one: one session per
conversation), reading a ``run_code`` result the way every framework needs to (suspended
or not, the text for the model) and the pending call of a paused run."""

from __future__ import annotations

from typing import Any, TypeAlias

import ptc

__all__ = ("Target", "approval_request", "checked", "error_text", "is_suspended", "scope_of")

Target: TypeAlias = "ptc.Scope | ptc.Session"
"""What an adapter serves: a scope, or a :class:`ptc.Session` of one, whose ``run_code``
keeps the program's variables and files between the calls of one conversation."""


def checked(target: object, what: str) -> Target:
    """``target`` if it is a scope or a session, else :class:`ptc.UsageError`."""
    if not isinstance(target, ptc.Scope | ptc.Session):
        raise ptc.UsageError(f"{what} takes a ptc.Scope or a ptc.Session")
    return target


def scope_of(target: Target) -> ptc.Scope:
    """The scope itself (a session's own), e.g. to follow its ``tools/change``."""
    scope = target.scope if isinstance(target, ptc.Session) else target
    assert isinstance(scope, ptc.Scope)
    return scope


def is_suspended(result: ptc.ToolResult) -> bool:
    """The call paused on a deferred approval (``SUSPENDED``): a person must decide."""
    return result.error is not None and result.error.code == "SUSPENDED"


def error_text(result: ptc.ToolResult) -> str:
    """What the model reads of a failed call: its text (``Error: <message>``)."""
    return result.text or (f"Error: {result.error.message}" if result.error else "Error")


def approval_request(suspension: ptc.Suspension) -> dict[str, Any]:
    """What a person needs to decide on a paused run: the pending call and why it asks, plain
    JSON (framework approval metadata, an interrupt's value)."""
    pending = suspension.pending
    return {
        "ptc_call_id": suspension.call_id,
        "tool": pending.name,
        "arguments": pending.arguments,
        "reason": pending.display_reason or pending.reason,
        "sub_call_id": pending.sub_call_id,
        "expires_at": suspension.expires_at,
    }
