"""``EventLog``: a JSONL record of every call, so a run's call tree can be inspected offline.

It is an ordinary set of listeners (``tools/pre-execute`` to note the start, ``tools/result``
to write the call, ``tools/ptc-dispatch-log`` to write what code mode logged), attached
with :meth:`EventLog.attach`. ``python -m ptc tree LOG`` prints the tree.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

from .._calls._decisions import DispatchLogEntry
from .._calls._events import Disposer
from .._calls._tools import ExecutionToken, ToolExecution
from .._json import JSON, thaw
from .._results import DECISION_CODES, ContentBlock, ToolResult
from .._runtime import ToolRuntime
from .._scopes._scope import Scope


class EventLog:
    """Append one JSON line per call (``event: "call"``) and per logged nested call
    (``event: "dispatch"``) to ``path``.

    Call records hold ``call_id, parent_call_id, root_call_id, tool, arguments, decision,
    is_error, error_code, content, started_at`` (epoch seconds) and ``duration_ms``.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._started: dict[str, tuple[ToolExecution, float, float]] = {}
        self._tokens: dict[int, tuple[ExecutionToken, str]] = {}

    def attach(self, runtime: ToolRuntime, *, scope: Scope | None = None) -> Disposer:
        """Listen to ``runtime`` (or only ``scope``'s subtree); the disposer detaches."""
        disposers = [
            runtime.on("tools/pre-execute", self._pre_execute, scope=scope),
            runtime.on("tools/result", self._result, scope=scope),
            runtime.on("tools/ptc-dispatch-log", self._dispatch_log, scope=scope),
        ]

        def detach() -> None:
            for dispose in disposers:
                dispose()

        return Disposer(detach)

    def close(self) -> None:
        """Close the log's file (records written so far stay); the listeners stay attached
        until their disposer is called. Idempotent."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    # -- listeners --------------------------------------------------------------------

    async def _pre_execute(
        self, execution: ToolExecution, next_: Callable[[], Awaitable[Any]]
    ) -> Any:
        self._started[execution.call_id] = (execution, time.time(), time.perf_counter())
        self._tokens[id(execution.token)] = (execution.token, execution.call_id)
        return await next_()

    def _result(self, result: ToolResult) -> None:
        started = self._started.pop(result.call_id, None)
        execution = started[0] if started else None
        if execution is not None:
            self._tokens.pop(id(execution.token), None)
        error = result.error
        code = error.code if error is not None else None
        self._write(
            {
                "event": "call",
                "call_id": result.call_id,
                "parent_call_id": self._parent_id(result.call_id, execution),
                "root_call_id": execution.root_call_id if execution else result.call_id,
                "tool": result.name,
                "arguments": thaw(execution.arguments) if execution else None,
                "decision": code if code in DECISION_CODES else "allowed",
                "is_error": result.is_error,
                "error_code": code,
                "content": thaw(result.content),
                "started_at": round(started[1], 6) if started else None,
                "duration_ms": (
                    round((time.perf_counter() - started[2]) * 1000, 3) if started else None
                ),
            }
        )

    async def _dispatch_log(
        self, entry: DispatchLogEntry, next_: Callable[[], Awaitable[Sequence[ContentBlock]]]
    ) -> Sequence[ContentBlock]:
        content = await next_()
        self._write(
            {
                "event": "dispatch",
                "call_id": entry.execution.call_id,
                "sub_call_id": entry.sub_call_id,
                "tool": entry.name,
                "is_error": entry.is_error,
                "content": thaw(list(content)),
            }
        )
        return content

    # -- helpers ----------------------------------------------------------------------

    def _parent_id(self, call_id: str, execution: ToolExecution | None) -> str | None:
        if execution is not None and execution.parent is not None:
            known = self._tokens.get(id(execution.parent))
            if known is not None and known[0] is execution.parent:
                return known[1]
        outer, sep, _ = call_id.rpartition(":ptc:")
        return outer if sep else None

    def _write(self, record: dict[str, JSON]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - long-lived
            self._file.write(line + "\n")
            self._file.flush()


__all__ = ["EventLog"]
