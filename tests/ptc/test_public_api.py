"""The public surface of ``ptc`` is pinned: changing it is a deliberate, reviewed step."""

from __future__ import annotations

import ptc

EXPECTED = [
    "Accept",
    "Allow",
    "ApprovalRequest",
    "Ask",
    "Block",
    "Cancel",
    "CancelSignal",
    "Containment",
    "Deny",
    "DispatchLogEntry",
    "Disposer",
    "EventLog",
    "ERROR_CODES",
    "ExecutionToken",
    "FrozenDict",
    "FrozenList",
    "Limits",
    "Output",
    "PostExecute",
    "Scope",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "ToolRuntime",
    "ToolView",
    "define_tool",
    "tool",
]


def test_all_is_pinned() -> None:
    assert sorted(ptc.__all__) == sorted(EXPECTED)


def test_every_name_in_all_exists() -> None:
    for name in ptc.__all__:
        assert hasattr(ptc, name), name


def test_limits_and_containment_are_the_worker_types() -> None:
    import worker

    assert ptc.Limits is worker.Limits
    assert ptc.Containment is worker.Containment
