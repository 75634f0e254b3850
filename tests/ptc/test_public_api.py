"""The public surface of ``ptc`` is pinned: changing it is a deliberate, reviewed step."""

from __future__ import annotations

import typing

import ptc

EXPECTED = [
    "Accept",
    "Allow",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "Ask",
    "Block",
    "Cancel",
    "CancelSignal",
    "ChangeListener",
    "CloseHook",
    "ClosedError",
    "ConfigurationError",
    "Containment",
    "ContentBlock",
    "DefinitionError",
    "Deny",
    "Discovery",
    "DiscoveryMode",
    "DispatchLogEntry",
    "DispatchLogListener",
    "Disposer",
    "ERROR_CODES",
    "ErrorCode",
    "Event",
    "EventLog",
    "ExecuteListener",
    "ExecuteNext",
    "ExecutionToken",
    "FAILURE_KINDS",
    "FailureKind",
    "FileSuspensionStore",
    "FrozenDict",
    "FrozenList",
    "Guard",
    "JSON",
    "JSONLike",
    "Lifetime",
    "Limits",
    "Mode",
    "ModelFormat",
    "NotJSONError",
    "Output",
    "PostExecute",
    "PostExecuteListener",
    "PreExecuteListener",
    "Profile",
    "PtcError",
    "ResultListener",
    "SchemaError",
    "Scope",
    "ScopeError",
    "ScopeRef",
    "SuspensionError",
    "SuspensionStore",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolExecution",
    "ToolOptions",
    "ToolResult",
    "ToolReturn",
    "ToolRuntime",
    "ToolUnavailable",
    "ToolView",
    "UsageError",
    "define_tool",
    "lenient_schema",
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


def test_every_exception_ptc_raises_on_purpose_derives_from_ptc_error() -> None:
    for cls, builtin in [
        (ptc.DefinitionError, ValueError),
        (ptc.SchemaError, ValueError),
        (ptc.NotJSONError, ValueError),
        (ptc.ScopeError, ValueError),
        (ptc.ConfigurationError, ValueError),
        (ptc.UsageError, TypeError),
        (ptc.ClosedError, RuntimeError),
        (ptc.SuspensionError, ValueError),
    ]:
        assert issubclass(cls, ptc.PtcError) and issubclass(cls, builtin), cls
    assert issubclass(ptc.SchemaError, ptc.DefinitionError)


def test_error_codes_are_the_literal_type() -> None:
    assert ptc.ERROR_CODES == typing.get_args(ptc.ErrorCode)
    assert ptc.FAILURE_KINDS == typing.get_args(ptc.FailureKind)
