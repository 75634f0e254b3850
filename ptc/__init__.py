"""ptc: programmatic tool calling for agent hosts.

Scopes decide which tools a model sees, every call goes through one policy pipeline, and
code mode lets a model call tools from a contained Python program.
"""

from worker import FAILURE_KINDS as FAILURE_KINDS
from worker import Containment as Containment
from worker import FailureKind as FailureKind
from worker import Limits as Limits
from worker import Profile as Profile

from . import content as content
from ._calls._body import ToolReturn as ToolReturn
from ._calls._body import ToolUnavailable as ToolUnavailable
from ._calls._decisions import Accept as Accept
from ._calls._decisions import Allow as Allow
from ._calls._decisions import ApprovalAnswer as ApprovalAnswer
from ._calls._decisions import ApprovalRequest as ApprovalRequest
from ._calls._decisions import Approver as Approver
from ._calls._decisions import Ask as Ask
from ._calls._decisions import Block as Block
from ._calls._decisions import Cancel as Cancel
from ._calls._decisions import Deny as Deny
from ._calls._decisions import DispatchLogEntry as DispatchLogEntry
from ._calls._decisions import PostExecute as PostExecute
from ._calls._decorator import ToolOptions as ToolOptions
from ._calls._decorator import tool as tool
from ._calls._events import DispatchLogListener as DispatchLogListener
from ._calls._events import Disposer as Disposer
from ._calls._events import Event as Event
from ._calls._events import ExecuteListener as ExecuteListener
from ._calls._events import ExecuteNext as ExecuteNext
from ._calls._events import OutputListener as OutputListener
from ._calls._events import PostExecuteListener as PostExecuteListener
from ._calls._events import PreExecuteListener as PreExecuteListener
from ._calls._events import ResultListener as ResultListener
from ._calls._lifetime import CloseHook as CloseHook
from ._calls._lifetime import Lifetime as Lifetime
from ._calls._policy import Guard as Guard
from ._calls._scheduler import ToolCall as ToolCall
from ._calls._tools import RUN_CODE as RUN_CODE
from ._calls._tools import ExecutionToken as ExecutionToken
from ._calls._tools import Output as Output
from ._calls._tools import ScopeRef as ScopeRef
from ._calls._tools import ToolContext as ToolContext
from ._calls._tools import ToolDefinition as ToolDefinition
from ._calls._tools import ToolExecution as ToolExecution
from ._calls._tools import define_tool as define_tool
from ._errors import ClosedError as ClosedError
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DefinitionError as DefinitionError
from ._errors import NotJSONError as NotJSONError
from ._errors import PtcError as PtcError
from ._errors import SchemaError as SchemaError
from ._errors import ScopeError as ScopeError
from ._errors import SearchUnavailable as SearchUnavailable
from ._errors import SessionError as SessionError
from ._errors import SuspensionError as SuspensionError
from ._errors import UsageError as UsageError
from ._json import JSON as JSON
from ._json import FrozenDict as FrozenDict
from ._json import FrozenList as FrozenList
from ._json import JSONLike as JSONLike
from ._json import thaw as thaw
from ._observe._eventlog import EventLog as EventLog
from ._results import ERROR_CODES as ERROR_CODES
from ._results import ContentBlock as ContentBlock
from ._results import ErrorCode as ErrorCode
from ._results import ToolError as ToolError
from ._results import ToolResult as ToolResult
from ._runtime import ToolRuntime as ToolRuntime
from ._schema import lenient_schema as lenient_schema
from ._scopes._layers import Discovery as Discovery
from ._scopes._layers import DiscoveryMode as DiscoveryMode
from ._scopes._layers import Mode as Mode
from ._scopes._layers import ModelFormat as ModelFormat
from ._scopes._layers import ToolView as ToolView
from ._scopes._scope import ChangeListener as ChangeListener
from ._scopes._scope import Scope as Scope
from ._scopes._session_view import Session as Session
from ._sessions._session_files import FileSessionStore as FileSessionStore
from ._sessions._session_store import MemorySessionStore as MemorySessionStore
from ._sessions._session_store import SessionRecord as SessionRecord
from ._sessions._session_store import SessionStore as SessionStore
from ._signals import CancelSignal as CancelSignal
from ._suspend._suspension_files import FileSuspensionStore as FileSuspensionStore
from ._suspend._suspensions import PendingApproval as PendingApproval
from ._suspend._suspensions import RecordedCall as RecordedCall
from ._suspend._suspensions import Suspension as Suspension
from ._suspend._suspensions import SuspensionStore as SuspensionStore

__all__ = (
    "ERROR_CODES",
    "FAILURE_KINDS",
    "JSON",
    "JSONLike",
    "RUN_CODE",
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
    "ErrorCode",
    "Event",
    "EventLog",
    "ExecuteListener",
    "ExecuteNext",
    "ExecutionToken",
    "FailureKind",
    "FileSessionStore",
    "FileSuspensionStore",
    "FrozenDict",
    "FrozenList",
    "Guard",
    "Lifetime",
    "Limits",
    "MemorySessionStore",
    "Mode",
    "ModelFormat",
    "NotJSONError",
    "Output",
    "OutputListener",
    "PendingApproval",
    "PostExecute",
    "PostExecuteListener",
    "PreExecuteListener",
    "Profile",
    "PtcError",
    "RecordedCall",
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
    "Suspension",
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
    "content",
    "define_tool",
    "lenient_schema",
    "thaw",
    "tool",
)
