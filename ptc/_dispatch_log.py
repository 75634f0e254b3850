"""The dispatch log of one ``run_code`` run: a record per nested call, in the order the calls
completed, returned in the run's ``meta["dispatch_log"]``.

A live call's content goes through the ``tools/ptc-dispatch-log`` waterfall first
(listeners may redact or shorten what is logged; a listener that fails is logged and the
original kept); a replayed call is logged as the record answered it, marked ``replayed``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._decisions import DispatchLogEntry
from ._events import DISPATCH_LOG, ListenerError, logger, run_waterfall
from ._json import JSON, thaw
from ._results import ContentBlock, ToolResult, freeze_content
from ._scheduler import ToolCall
from ._scopes import Scope, call_site
from ._suspensions import RecordedCall
from ._tools import ToolExecution

__all__ = ("DispatchLog",)


class DispatchLog:
    """The records of one run's nested calls (``entries``, plain JSON)."""

    def __init__(self, execution: ToolExecution, scope: Scope) -> None:
        self.execution = execution
        self.scope = scope
        self.entries: list[JSON] = []

    def replayed(self, call: ToolCall, recorded: RecordedCall) -> None:
        """Log a call the replayed record answered."""
        error_code = None if recorded.ok else recorded.code
        self.entries.append(
            _log_record(call, recorded.arguments, error_code, recorded.content, 0.0, replayed=True)
        )

    async def live(self, call: ToolCall, result: ToolResult, duration_ms: float) -> dict[str, JSON]:
        """Log the call (through the dispatch-log waterfall) and return its log record."""
        arguments = thaw(dict(call.arguments))  # a copy independent of the dispatched one
        content: Sequence[ContentBlock] = result.content
        listeners = call_site(self.scope).listeners(DISPATCH_LOG)
        if listeners:
            entry = DispatchLogEntry(
                execution=self.execution,
                sub_call_id=call.call_id or "",
                name=call.name,
                arguments=arguments,
                is_error=result.is_error,
                content=result.content,
            )

            async def original(_: DispatchLogEntry) -> Sequence[ContentBlock]:
                return result.content

            try:
                content = freeze_content(
                    await run_waterfall(listeners, entry, original, _is_content)
                )
            except (ListenerError, TypeError, ValueError):
                logger.warning("dispatch-log listener failed; logging the original", exc_info=True)
                content = result.content
        error_code = result.error.code if result.error is not None else None
        record = _log_record(
            call, arguments, error_code, thaw(list(content)), duration_ms, replayed=False
        )
        self.entries.append(record)
        return record


def _is_content(value: object) -> bool:
    # Shape only; the full check happens once, when the logged content is frozen.
    return isinstance(value, list | tuple)


def _log_record(
    call: ToolCall,
    arguments: JSON,
    error_code: str | None,
    content: JSON,
    duration_ms: float,
    *,
    replayed: bool,
) -> dict[str, JSON]:
    """One entry of ``meta["dispatch_log"]``."""
    return {
        "sub_call_id": call.call_id or "",
        "name": call.name,
        "arguments": arguments,
        "is_error": error_code is not None,
        "error_code": error_code,
        "content": content,
        "duration_ms": round(duration_ms, 3),
        "replayed": replayed,
    }
