"""What a scope asks of code mode: its SDK or a subset of it (``sdk``, ``sdk_async``), a
search of its tools, ``prepare``, and its paused runs by call id.

:class:`ScopeCodeMode` is this half of :class:`~ptc._scopes._scope.Scope`'s public API (``Scope``
inherits it). Each method checks its arguments and asks the runtime's code mode, through
the :class:`~ptc._scopes._scope_tree.CodeModeHooks` of the scope's tree, about this scope; the
tree is all it needs of the scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._calls._decisions import ApprovalAnswer
from .._errors import UsageError
from .._json import JSON
from .._results import ToolResult
from .._suspend._suspensions import Suspension
from ._layers import names_of
from ._scope_tree import ScopeTree

__all__ = ("ScopeCodeMode",)


class ScopeCodeMode:
    """The code-mode half of a scope's API (see the module docstring)."""

    _tree: ScopeTree[Any]
    """The scope's tree (set by :class:`~ptc._scopes._scope.Scope`)."""

    # -- the SDK and the catalog --------------------------------------------------------

    def sdk(self, tools: Iterable[str] | None = None) -> str:
        """The SDK stub (valid Python, type-checkable) of this scope's visible tools, or of
        the visible ``tools`` named (e.g. for a system prompt). Blocks the calling thread
        while the stub is built or generated if it is not ready: after ``await
        prepare()`` it is ready in inline discovery, not necessarily in search discovery
        (its full stub needs every tool's types); on an event loop use :meth:`sdk_async`."""
        names = None if tools is None else names_of(tools, "tools")
        return self._tree.code_mode_hooks().sdk(self, names)

    async def sdk_async(self, tools: Iterable[str] | None = None) -> str:
        """:meth:`sdk` without blocking the event loop: the full stub is awaited from the
        background build, a subset's (``tools``) is generated on a worker thread. Once
        this returned the full stub, ``sdk()`` returns it at once until the next change."""
        names = None if tools is None else names_of(tools, "tools")
        return await self._tree.code_mode_hooks().sdk_async(self, names)

    def search_tools(self, query: str, limit: int = 10) -> list[dict[str, JSON]]:
        """The visible tools that best match ``query`` (``{"name", "ident", "summary"}``,
        best first): the ranking ``catalog.search`` gives programs (BM25). Builds the
        catalog here if it is not ready yet."""
        if not isinstance(query, str):
            raise UsageError("search_tools() takes a query string")
        if type(limit) is not int or limit < 1:
            raise UsageError(f"limit must be an int >= 1, got {limit!r}")
        return self._tree.code_mode_hooks().search_tools(self, query, limit)

    async def prepare(self) -> None:
        """Wait, without blocking the event loop, until what ``model_tools()`` and
        ``run_code`` need is built: the SDK ``run_code``'s description embeds (a no-op for a
        native scope). Until the next change they then build nothing on the calling thread;
        nor does ``sdk()`` (the full stub) in inline discovery. In search discovery the full
        stub is only started in the background, so ``sdk()`` may still wait for it: ``await
        sdk_async()`` instead. A subset (``sdk(tools=...)``) is generated when asked."""
        await self._tree.code_mode_hooks().prepare(self)

    # -- paused runs --------------------------------------------------------------------

    def suspension(self, call_id: str) -> Suspension | None:
        """The paused run of the ``run_code`` call ``call_id`` in this scope (``None``: none,
        or it was resumed, discarded or expired). Its ``token``, ``pending`` call and
        ``code`` say what awaits a decision; an agent framework knows only its call ids."""
        return self._tree.code_mode_hooks().suspension(self, call_id)

    async def discard_suspension(self, call_id_or_token: str) -> Suspension:
        """Drop a paused run without resuming it (the host told the model the call was
        denied some other way): its record is removed and nothing runs. Raises
        :class:`ptc.SuspensionError` as :meth:`resume` does."""
        return await self._tree.code_mode_hooks().discard(self, call_id_or_token)

    async def resume(self, call_id_or_token: str, answer: ApprovalAnswer) -> ToolResult:
        """Resume a run that was suspended on a deferred approval (``SUSPENDED``).

        ``call_id_or_token`` is the call id of the paused ``run_code`` call or the
        suspension's token (``meta["suspension"]["token"]``).

        The same program runs again in a fresh worker: calls that completed before the
        pause are answered from the record (their tools and policy do not run again), the
        pending call continues through the pipeline with ``answer`` (``"allowed-once"``,
        ``"rejected"`` or ``"cancelled"``) in place of the approver, later calls run live.
        Returns the ``run_code`` result (the original ``call_id``), which may be
        ``SUSPENDED`` again. Raises :class:`ptc.SuspensionError` for a token that is
        unknown, expired, resumed already or from another scope.
        """
        return await self._tree.code_mode_hooks().resume(self, call_id_or_token, answer)
