"""A ptc scope as LangChain tools, for LangChain agents and LangGraph graphs:
``create_agent(model, tools=langchain.tools(scope))``.

Extra ``ptc[langchain]``. Each tool is a ``BaseTool`` with the tool's JSON schema, sync
(``invoke``) and async (``ainvoke``), calling ``scope.call(name, arguments,
call_id=<the ToolCall's id>)``; its output is the result's text, and its artifact the
whole result as plain JSON (``result.as_json()``:
``response_format="content_and_artifact"``; plain JSON, so any checkpointer stores it). A
failed call is a ``ToolMessage`` with ``status="error"`` and ptc's error text: the model
reads it.

**Approvals** are LangGraph ``interrupt()``s: a run paused on a deferred approval interrupts
the graph with the pending call (``{"tool", "arguments", "reason", ...}``); resume it with
``Command(resume="allowed-once" | "rejected" | "cancelled")``. LangGraph runs the tool again
from the start on resume; the re-run is replay-safe: the paused call id answers
``SUSPENDED`` without running anything, the program then resumes with the answer (the
calls it made are not made again), and a program that pauses again interrupts again. Each
tool body runs once. (A graph that interrupts needs a checkpointer, as any LangGraph
interrupt does.)

**Sync use**: the sync path runs the scope's calls on the runtime's event loop: build the
tools inside it (an ``async`` function) and call them from another thread (LangGraph's
sync ``invoke`` from ``anyio.to_thread``, or a framework thread pool), or pass ``portal=``
(an ``anyio.from_thread.BlockingPortal`` running the runtime) for a host that is sync
throughout. **Cancellation** is the framework's: a cancelled ``ainvoke`` cancels
``scope.call``.

The list is taken when ``tools()`` is called: after a ``tools/change``, call it again for
the next step (LangGraph binds tools when the graph is built).

**Sessions**: ``tools(session)`` runs every ``run_code`` on that :class:`ptc.Session`.
For a graph that serves many conversations, ``tools(scope, per_thread=True)`` gives each
LangGraph thread a session of its own, keyed by the ``thread_id`` of the run's config
(``scope.session(id=..., create=True)``: with a :class:`ptc.FileSessionStore` a thread
goes on with its variables and files after a restart, as its checkpointer does).
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

import anyio.from_thread
import anyio.lowlevel
from anyio.from_thread import BlockingPortal
from langchain_core.tools import BaseTool, ToolException
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import ConfigDict

import ptc
from ptc import JSON

from ._common import Target, approval_request, checked, error_text, is_suspended

__all__ = ("PtcTool", "tools")

T = TypeVar("T")
_RESUME_ANSWERS = ("allowed-once", "rejected", "cancelled")
# The id of the ToolCall being run (BaseTool hands it to run/arun, not to _run/_arun).
_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("ptc_lc_id", default=None)


def tools(
    scope: Target, *, portal: BlockingPortal | None = None, per_thread: bool = False
) -> list[PtcTool]:
    """The scope's tools (``scope.model_tools()``) as LangChain tools; ``per_thread=True``:
    one session of ``scope`` per LangGraph thread (see the module docstring)."""
    scope = checked(scope, "tools()")
    specs = scope.model_tools()
    if per_thread:
        if not isinstance(scope, ptc.Scope):
            raise ptc.UsageError("per_thread=True takes a ptc.Scope (each thread gets a session)")
        shown = scope.session()  # the description and input a session's run_code has
        specs = shown.model_tools()
        shown.discard("made to read the tools' descriptions")
    try:
        token: anyio.lowlevel.EventLoopToken | None = anyio.lowlevel.current_token()
    except RuntimeError:
        token = None
    return [
        PtcTool(
            name=str(spec["name"]),
            description=str(spec["description"]),
            args_schema=_schema(spec["input_schema"]),
            scope=scope,
            portal=portal,
            token=token,
            per_thread=per_thread,
        )
        for spec in specs
    ]


class PtcTool(BaseTool):
    """One tool of a ptc scope (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scope: ptc.Scope | ptc.Session
    portal: BlockingPortal | None = None
    per_thread: bool = False
    token: Any = None
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kw: Any) -> Any:
        reset = _CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kw)
        finally:
            _CALL_ID.reset(reset)

    async def arun(
        self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kw: Any
    ) -> Any:
        reset = _CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kw)
        finally:
            _CALL_ID.reset(reset)

    def _target(self) -> Target:
        """Where this call runs: the scope (or session), or the LangGraph thread's session."""
        if not self.per_thread or not isinstance(self.scope, ptc.Scope):
            return self.scope
        try:
            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread = None
        if thread is None:
            raise ToolException("per_thread tools run in a LangGraph graph with a thread_id")
        digest = hashlib.sha256(str(thread).encode("utf-8", "surrogatepass")).hexdigest()
        return self.scope.session(id=f"langgraph-{digest[:32]}", create=True)

    async def _arun(self, **arguments: Any) -> tuple[str, dict[str, JSON]]:
        call_id = _CALL_ID.get()
        result = await self._target().call(self.name, arguments, call_id=call_id)
        asked = 0
        while is_suspended(result):
            answer, asked = self._decide(result.call_id, asked)
            result = await self.scope.resume(result.call_id, answer)
        return _content(result)

    def _run(self, **arguments: Any) -> tuple[str, dict[str, JSON]]:
        call_id = _CALL_ID.get()
        result = self._on_loop(self._call, self._target(), arguments, call_id)
        asked = 0
        while is_suspended(result):
            answer, asked = self._decide(result.call_id, asked)
            result = self._on_loop(self.scope.resume, result.call_id, answer)
        return _content(result)

    async def _call(
        self, target: Target, arguments: dict[str, Any], call_id: str | None
    ) -> ptc.ToolResult:
        return await target.call(self.name, arguments, call_id=call_id)

    def _decide(self, call_id: str, asked: int) -> tuple[Any, int]:
        """The person's answer to the paused run, through ``interrupt()``. LangGraph answers
        the n-th ``interrupt()`` of a node with the n-th resume value, and re-runs the node
        from the start: answers given before (``resumes`` of them) are asked again first,
        so each pause gets its own answer."""
        paused = self.scope.suspension(call_id)
        if paused is None:
            raise ToolException(f"the paused run of {call_id} is gone (resumed or expired)")
        while asked < paused.resumes:
            interrupt(approval_request(paused))  # answered already: returns that answer
            asked += 1
        answer = interrupt(approval_request(paused))
        if answer not in _RESUME_ANSWERS:
            raise ToolException(
                f"resume with one of {_RESUME_ANSWERS} (Command(resume=...)), got {answer!r}"
            )
        return answer, asked + 1

    def _on_loop(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        if self.portal is not None:
            called: T = self.portal.call(fn, *args)
            return called
        if self.token is None:
            raise ptc.UsageError(
                "sync use of ptc tools needs the runtime's event loop: call tools() inside it, "
                "or pass portal="
            )
        result: T = anyio.from_thread.run(fn, *args, token=self.token)
        return result


def _schema(schema: object) -> dict[str, Any]:
    assert isinstance(schema, dict)
    return schema


def _content(result: ptc.ToolResult) -> tuple[str, dict[str, JSON]]:
    if result.is_error:
        raise ToolException(error_text(result))
    return result.text, result.as_json()  # plain JSON: any checkpointer stores it
