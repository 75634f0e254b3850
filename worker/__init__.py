"""Worker processes: a zygote, contained children, the frame protocol and the child runtime.

Host-side public face. ``worker`` never imports ``ptc``. :func:`parse_program` and
:func:`compile_program` are the child's own checks of a program, for a host's pre-flight.

The names that need the host's async machinery (anyio: the backends, their interfaces, the
pacer) are imported when first used, not with the package: the zygote and every child
import ``worker`` too, and what they never run would only make each fork copy more page
tables and each child share more pages (anyio, with what it brings, is about 0.6 MiB of
the zygote's anonymous memory).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._child._source import MAX_PROGRAM_BYTES as MAX_PROGRAM_BYTES
from ._child._source import CompileFailure as CompileFailure
from ._child._source import compile_program as compile_program
from ._child._source import parse_program as parse_program
from ._child._source import program_size_problem as program_size_problem
from ._errors import ProtocolError as ProtocolError
from ._errors import WorkerError as WorkerError
from ._host._timing import TimingHook as TimingHook
from ._host._timing import set_timing_hook as set_timing_hook
from ._host._timing import timing_mark as timing_mark
from ._output import OutputCapture as OutputCapture
from ._protocol._json_bytes import JsonValues as JsonValues
from ._protocol._messages import HOST_OPERATION_MARK as HOST_OPERATION_MARK
from ._protocol._messages import HOST_OPERATIONS as HOST_OPERATIONS
from ._types import DIMENSIONS as DIMENSIONS
from ._types import FAILURE_KINDS as FAILURE_KINDS
from ._types import SESSION_SAVED_KINDS as SESSION_SAVED_KINDS
from ._types import CallReply as CallReply
from ._types import CallRequest as CallRequest
from ._types import CapturedOutput as CapturedOutput
from ._types import Containment as Containment
from ._types import Dimension as Dimension
from ._types import Enforcement as Enforcement
from ._types import FailureKind as FailureKind
from ._types import Limits as Limits
from ._types import Profile as Profile
from ._types import RunOutcome as RunOutcome
from ._types import RunRequest as RunRequest
from ._types import RunStats as RunStats
from ._types import SessionSave as SessionSave

__all__ = (
    "DIMENSIONS",
    "FAILURE_KINDS",
    "HOST_OPERATIONS",
    "HOST_OPERATION_MARK",
    "MAX_PROGRAM_BYTES",
    "SESSION_SAVED_KINDS",
    "CallBatch",
    "CallHandler",
    "CallReply",
    "CallRequest",
    "CallStarter",
    "CapturedOutput",
    "CompileFailure",
    "Containment",
    "Dimension",
    "Enforcement",
    "FailureKind",
    "JsonValues",
    "Limits",
    "OutputCapture",
    "Pacer",
    "Profile",
    "ProtocolError",
    "RunOutcome",
    "RunRequest",
    "RunStats",
    "SessionSave",
    "StdoutListener",
    "SubprocessBackend",
    "TimingHook",
    "WorkerBackend",
    "WorkerError",
    "compile_program",
    "parse_program",
    "program_size_problem",
    "set_timing_hook",
    "timing_mark",
)

if _TYPE_CHECKING:
    from ._abc import CallBatch as CallBatch
    from ._abc import CallHandler as CallHandler
    from ._abc import CallStarter as CallStarter
    from ._abc import StdoutListener as StdoutListener
    from ._abc import WorkerBackend as WorkerBackend
    from ._host._backend import SubprocessBackend as SubprocessBackend
    from ._host._pacing import Pacer as Pacer

_ON_THE_HOST = {
    "CallBatch": "._abc",
    "CallHandler": "._abc",
    "CallStarter": "._abc",
    "StdoutListener": "._abc",
    "WorkerBackend": "._abc",
    "SubprocessBackend": "._host._backend",
    "Pacer": "._host._pacing",
}


def __getattr__(name: str) -> _Any:
    """A host-side name, imported on first use (see the module docstring)."""
    module = _ON_THE_HOST.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
