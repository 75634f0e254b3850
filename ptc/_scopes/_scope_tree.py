"""What the scopes of one runtime share: the settings, the listener registry, the change
counter (and the batching of ``tools/change``), the sessions, and the hooks code mode gives
them.

Created by the runtime and read by every :class:`~ptc._scopes._scope.Scope`; it knows scopes only
as the type parameter ``S`` (the runtime's is ``ScopeTree[Scope]``), so this module sits
below ``_scopes`` in the one-way stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

from worker import Limits, Profile

from .._calls._decisions import ApprovalAnswer, Approver
from .._calls._events import Listeners
from .._calls._lifetime import Lifetime
from .._calls._tools import ToolDefinition
from .._json import JSON
from .._results import ToolResult
from .._sessions._session_runs import SessionKeepers
from .._suspend._suspensions import Suspension
from ._layers import Mode

__all__ = ("CodeModeHooks", "ScopeTree")

S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)


class CodeModeHooks(Protocol[S_contra]):
    """What scopes need from code mode (the runtime installs
    :class:`ptc._code._codemode.CodeMode`)."""

    def run_code_tool(self, scope: S_contra, tools: Mapping[str, ToolDefinition]) -> ToolDefinition:
        """The scope's ``run_code``; ``tools`` are its visible native tools (its SDK's)."""
        ...

    def sdk(self, scope: S_contra, tools: frozenset[str] | None) -> str:
        """The SDK stub of the scope's visible native tools, or of those named in ``tools``
        (built now if need be)."""
        ...

    async def sdk_async(self, scope: S_contra, tools: frozenset[str] | None) -> str:
        """:meth:`sdk`, waiting for the build (or generating a subset) off the event loop."""
        ...

    def search_tools(self, scope: S_contra, query: str, limit: int) -> list[dict[str, JSON]]:
        """The scope's visible tools that best match ``query``, best first."""
        ...

    def ensure_ready(self, scope: S_contra) -> None:
        """Build the scope's SDK now (blocking) unless it is built already."""
        ...

    async def prepare(self, scope: S_contra) -> None:
        """Wait, off the event loop, until the scope's SDK is built."""
        ...

    async def resume(self, scope: S_contra, token: str, answer: ApprovalAnswer) -> ToolResult:
        """Run a suspended program again, answering the pending call with ``answer``
        (``token``: the suspension's token or the call id it paused)."""
        ...

    def suspension(self, scope: S_contra, call_id: str) -> Suspension | None:
        """The live suspension of the ``run_code`` call ``call_id`` in the scope."""
        ...

    async def discard(self, scope: S_contra, key: str) -> Suspension:
        """Drop a suspended run without resuming it (``key``: call id or token)."""
        ...

    @property
    def revision(self) -> int:
        """Changes whenever an SDK finishes building."""
        ...


class ScopeTree(Generic[S]):
    """What every scope of one runtime shares. Created by the runtime, read by scopes.

    ``S`` is the scope class (``ScopeTree[Scope]``)."""

    def __init__(
        self,
        *,
        default_mode: Mode,
        approver: Approver | None,
        profile: Profile,
        limits: Limits,
        max_parallel_calls: int,
        changed: Callable[[S], None],
        lifetime: Lifetime,
        sessions: SessionKeepers,
    ) -> None:
        self.default_mode = default_mode
        self.approver = approver
        self.profile = profile
        self.limits = limits
        self.max_parallel_calls = max_parallel_calls
        self.listeners = Listeners()
        self.version = 0
        self.code_mode: CodeModeHooks[S] | None = None
        self.lifetime = lifetime
        self.sessions = sessions
        self._changed = changed
        self._held = 0
        self._pending: list[S] = []

    def code_mode_hooks(self) -> CodeModeHooks[S]:
        """What scopes ask of code mode (the runtime installs it before any scope asks)."""
        code_mode = self.code_mode
        assert code_mode is not None, "the runtime installs code mode"
        return code_mode

    def changed(self, scope: S) -> None:
        self.version += 1
        if self._held:
            if not any(s is scope for s in self._pending):
                self._pending.append(scope)
            return
        self._changed(scope)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold ``tools/change`` until the outermost batch ends: one per changed scope."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held:
                pending, self._pending = self._pending, []
                for scope in pending:
                    self._changed(scope)
