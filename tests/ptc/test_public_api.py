"""The public surface of ``ptc`` is pinned: changing it is a deliberate, reviewed step."""

from __future__ import annotations

import re
import typing

import ptc

EXPECTED = [
    "content",
    "RUN_CODE",
    "thaw",
    "Suspension",
    "RecordedCall",
    "PendingApproval",
    "OutputListener",
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
    "FileSessionStore",
    "FileSuspensionStore",
    "FrozenDict",
    "FrozenList",
    "Guard",
    "JSON",
    "JSONLike",
    "Lifetime",
    "Limits",
    "MemorySessionStore",
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
    "SearchUnavailable",
    "Session",
    "SessionError",
    "SessionRecord",
    "SessionStore",
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


def test_the_code_mode_half_of_a_scope_is_pinned() -> None:
    # DESIGN section 2 names sdk and prepare; sdk_async is ptc's addition (deviations.md).
    from ptc._scopes._scope_code import ScopeCodeMode

    assert issubclass(ptc.Scope, ScopeCodeMode)
    assert sorted(n for n in vars(ScopeCodeMode) if not n.startswith("_")) == [
        "discard_suspension",
        "prepare",
        "resume",
        "sdk",
        "sdk_async",
        "search_tools",
        "suspension",
    ]


def test_every_name_in_all_exists() -> None:
    for name in ptc.__all__:
        assert hasattr(ptc, name), name


def test_limits_and_containment_are_the_worker_types() -> None:
    import worker

    assert ptc.Limits is worker.Limits
    assert ptc.Containment is worker.Containment


def test_a_name_both_packages_export_is_one_object() -> None:
    # `ptc.Output` (a tool's output contract) once shared its name with worker's captured
    # stdout (now `worker.CapturedOutput`): one name, one meaning across the public face.
    import worker

    shared = set(ptc.__all__) & set(worker.__all__)
    assert shared == {"Containment", "FAILURE_KINDS", "FailureKind", "Limits", "Profile"}
    assert all(getattr(ptc, name) is getattr(worker, name) for name in shared)


def test_every_exception_ptc_raises_on_purpose_derives_from_ptc_error() -> None:
    for cls, builtin in [
        (ptc.DefinitionError, ValueError),
        (ptc.SchemaError, ValueError),
        (ptc.NotJSONError, ValueError),
        (ptc.ScopeError, ValueError),
        (ptc.ConfigurationError, ValueError),
        (ptc.UsageError, TypeError),
        (ptc.ClosedError, RuntimeError),
        (ptc.SearchUnavailable, RuntimeError),
        (ptc.SuspensionError, ValueError),
    ]:
        assert issubclass(cls, ptc.PtcError) and issubclass(cls, builtin), cls
    assert issubclass(ptc.SchemaError, ptc.DefinitionError)


def test_error_codes_are_the_literal_type() -> None:
    assert ptc.ERROR_CODES == typing.get_args(ptc.ErrorCode)
    assert ptc.FAILURE_KINDS == typing.get_args(ptc.FailureKind)


def test_every_exception_class_is_named_where_the_docs_list_them() -> None:
    # The lists in prose are copies: this keeps them whole when a class is added.
    import inspect
    from pathlib import Path

    classes = {
        name
        for name, obj in vars(ptc).items()
        if inspect.isclass(obj) and issubclass(obj, ptc.PtcError) and obj is not ptc.PtcError
    }
    docs = Path(__file__).parents[2] / "docs"
    architecture = (docs / "architecture.md").read_text(encoding="utf-8")
    errors_entry = next(line for line in architecture.splitlines() if "`_errors` —" in line)
    guide = (docs / "guide.md").read_text(encoding="utf-8")
    errors_section = guide.split("## Errors", 1)[1].split("\n## ", 1)[0]
    for text in (errors_entry, errors_section, ptc._errors.__doc__ or ""):
        assert {name for name in classes if name not in text} == set()


def test_ptc_closes_with_one_verb() -> None:
    # DESIGN names scope.close() and `await session.close()`; the runtime (async) and its
    # Lifetime follow them. ptc.mcp's Mount keeps the aclose() DESIGN section 9 names.
    import inspect

    closers = {
        name: cls
        for name, cls in vars(ptc).items()
        if inspect.isclass(cls) and name in ptc.__all__ and hasattr(cls, "close")
    }
    assert {"Scope", "Session", "ToolRuntime", "Lifetime", "EventLog"} <= set(closers)
    public = [n for n in ptc.__all__ if inspect.isclass(getattr(ptc, n))]
    assert [n for n in public if hasattr(getattr(ptc, n), "aclose")] == []
    assert inspect.iscoroutinefunction(ptc.ToolRuntime.close)


def test_every_public_entry_point_says_what_the_caller_gets() -> None:
    from tests._docstrings import private_references, undocumented

    assert undocumented(ptc) == []
    assert private_references(ptc) == []


def test_run_code_is_named_in_one_place() -> None:
    # Adapters and MCP serve compare with ptc.RUN_CODE; the name is defined once.
    import pathlib

    assert ptc.RUN_CODE == "run_code"
    package = pathlib.Path(ptc.__file__).parent
    defining = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.search(r"""(==|=|!=)\s*["']run_code["']""", line)
    ]
    assert defining == ["_calls/_tools.py"]
