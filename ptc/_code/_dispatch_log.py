"""The dispatch log of one ``run_code`` run: a record per nested call, in submission order
(each record is made as its call completes), returned in the run's ``meta["dispatch_log"]``.

A live call's content goes through the ``tools/ptc-dispatch-log`` waterfall first
(listeners may redact or shorten what is logged; a listener that fails is logged and the
original kept); a replayed call is logged as the record answered it, marked ``replayed``.

A run may make 100,000 calls: the log keeps the first :data:`DISPATCH_LOG_ENTRIES` in full
and counts the rest per tool and error code (:meth:`DispatchLog.summary`, the run's
``meta["dispatch_log_summary"]``); the waterfall still sees every call.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from .._calls._decisions import DispatchLogEntry
from .._calls._events import DISPATCH_LOG, ListenerError, logger, run_waterfall
from .._calls._scheduler import ToolCall
from .._calls._tools import ToolExecution
from .._errors import NotJSONError
from .._json import JSON, freeze, thaw
from .._results import ContentBlock, ToolResult, freeze_content
from .._scopes._scope import Scope, call_site
from .._suspend._suspensions import RecordedCall

__all__ = ("DISPATCH_LOG_ENTRIES", "DispatchLog")

DISPATCH_LOG_ENTRIES = 1000
"""Entries a run's dispatch log keeps in full; the calls past them are counted."""


class DispatchLog:
    """The records of one run's nested calls (``entries``, plain JSON)."""

    def __init__(self, execution: ToolExecution, scope: Scope) -> None:
        self.execution = execution
        self.scope = scope
        self.entries: list[JSON] = []
        self._positions: list[int] = []
        self._omitted_count = 0
        self._omitted_calls: dict[str, int] = {}
        self._omitted_errors: dict[str, dict[str, int]] = {}

    def replayed(self, call: ToolCall, recorded: RecordedCall) -> None:
        """Log a call the replayed record answered."""
        error_code = None if recorded.ok else recorded.code
        record = _log_record(
            call, recorded.arguments, error_code, recorded.content, 0.0, replayed=True
        )
        self._keep(record, call, error_code)

    def summary(self) -> dict[str, JSON] | None:
        """What the log left out, when it left out anything: ``{"limit", "calls" (every
        call logged or counted), "omitted", "omitted_by_tool": {name: {"calls", "errors":
        {code: count}}}}``."""
        if not self._omitted_count:
            return None
        by_tool: dict[str, JSON] = {
            name: {"calls": calls, "errors": dict(self._omitted_errors.get(name, {}))}
            for name, calls in self._omitted_calls.items()
        }
        return {
            "limit": DISPATCH_LOG_ENTRIES,
            "calls": len(self.entries) + self._omitted_count,
            "omitted": self._omitted_count,
            "omitted_by_tool": by_tool,
        }

    def _keep(self, record: dict[str, JSON], call: ToolCall, error_code: str | None) -> None:
        name = call.name
        if len(self.entries) < DISPATCH_LOG_ENTRIES:
            # In submission order (the calls of a batch may end in any order), and frozen
            # now, as each call ends: the run's meta is then frozen in one step per entry,
            # not in one long stretch at the end of the run.
            n = _position(call)
            at = bisect.bisect(self._positions, n)
            self._positions.insert(at, n)
            self.entries.insert(at, _frozen(record))
            return
        self._omitted_count += 1
        self._omitted_calls[name] = self._omitted_calls.get(name, 0) + 1
        if error_code is not None:
            errors = self._omitted_errors.setdefault(name, {})
            errors[error_code] = errors.get(error_code, 0) + 1

    async def live(self, call: ToolCall, result: ToolResult, duration_ms: float) -> dict[str, JSON]:
        """Log the call (through the dispatch-log waterfall) and return its log record
        (made, and returned, even when the log is full and only counts it)."""
        arguments = thaw(call.arguments)  # a copy independent of the dispatched one
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
            call, arguments, error_code, thaw(content), duration_ms, replayed=False
        )
        self._keep(record, call, error_code)
        return record


def _frozen(record: dict[str, JSON]) -> JSON:
    """The record frozen, or as it is if it cannot be (arguments nested as deep as a call's
    may be: the run's meta, frozen at its end, then says why)."""
    try:
        return freeze(record, "$.meta.dispatch_log")
    except NotJSONError:
        return record


def _position(call: ToolCall) -> int:
    """A nested call's number, from its ``<outer>:ptc:<n>`` id."""
    number = (call.call_id or "").rpartition(":")[2]
    return int(number) if number.isdigit() else 0


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
