"""What the adapters share: reading a ``run_code`` result the way every framework needs to
(suspended or not, the text for the model) and the pending call of a paused run."""

from __future__ import annotations

from typing import Any

import ptc

__all__ = ("approval_request", "error_text", "is_suspended")


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
