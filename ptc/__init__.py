"""ptc: programmatic tool calling for agent hosts.

Scopes decide which tools a model sees, every call goes through one policy pipeline, and
code mode lets a model call tools from a contained Python program.
"""

from worker import Containment as Containment
from worker import Limits as Limits

from ._decisions import Accept as Accept
from ._decisions import Allow as Allow
from ._decisions import ApprovalRequest as ApprovalRequest
from ._decisions import Ask as Ask
from ._decisions import Block as Block
from ._decisions import Cancel as Cancel
from ._decisions import Deny as Deny
from ._decisions import DispatchLogEntry as DispatchLogEntry
from ._decisions import PostExecute as PostExecute
from ._decorator import tool as tool
from ._eventlog import EventLog as EventLog
from ._events import Disposer as Disposer
from ._json import FrozenDict as FrozenDict
from ._json import FrozenList as FrozenList
from ._results import ERROR_CODES as ERROR_CODES
from ._results import ToolError as ToolError
from ._results import ToolResult as ToolResult
from ._runtime import ToolRuntime as ToolRuntime
from ._scheduler import ToolCall as ToolCall
from ._scopes import Scope as Scope
from ._scopes import ToolView as ToolView
from ._signals import CancelSignal as CancelSignal
from ._tools import ExecutionToken as ExecutionToken
from ._tools import Output as Output
from ._tools import ToolContext as ToolContext
from ._tools import ToolDefinition as ToolDefinition
from ._tools import ToolExecution as ToolExecution
from ._tools import define_tool as define_tool

__all__ = (
    "ERROR_CODES",
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
)
