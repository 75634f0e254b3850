"""The host every adapter test drives: a code-mode scope with notes tools whose bodies count
their runs, a policy that asks before deleting and denies a forbidden note, and an approver
that defers every ask (a person decides later, through the framework's own mechanism)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

import ptc
from worker.testing import FakeBackend

# A program that reads two notes, deletes one (asks first), then reads again.
PROGRAM = """\
a = tools.read_note(note_id=1)
b = tools.read_note(note_id=2)
gone = tools.delete_note(note_id=2)
return {"kept": a, "deleted": gone, "left": tools.read_note(note_id=1)}
"""
ANSWER = {"kept": "note 1", "deleted": "deleted 2", "left": "note 1"}
BAD_PROGRAM = "return 1 / 0"
FORBIDDEN = "return tools.delete_note(note_id=13)"
STUCK = "print('started')\nreturn tools.wait_for_ever()"


class Host:
    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.results: list[ptc.ToolResult] = []
        self.defer = True
        self.runtime: ptc.ToolRuntime | None = None
        self.waiting = anyio.Event()

    async def approver(self, request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        return "deferred" if self.defer else "allowed-once"

    def install(self, runtime: ptc.ToolRuntime) -> None:
        ran = self.ran

        @runtime.tool(concurrency_safe=True)
        def read_note(note_id: int) -> str:
            """Read a note."""
            ran["read_note"] += 1
            return f"note {note_id}"

        @runtime.tool
        def delete_note(note_id: int) -> str:
            """Delete a note (asks a person first)."""
            ran["delete_note"] += 1
            return f"deleted {note_id}"

        @runtime.tool
        async def wait_for_ever() -> str:
            """Wait until cancelled."""
            self.waiting.set()
            await anyio.sleep_forever()
            return "never"

        async def policy(execution: ptc.ToolExecution, nxt: Any) -> Any:
            if execution.name == "delete_note":
                if execution.arguments.get("note_id") == 13:
                    return ptc.Deny("note 13 is protected")
                return ptc.Ask("delete a note?")
            return await nxt()

        runtime.on("tools/pre-execute", policy)
        runtime.on("tools/result", self.results.append)

    def call_ids(self, name: str = "run_code") -> list[str]:
        return [r.call_id for r in self.results if r.name == name]

    def codes(self) -> dict[str, str | None]:
        """Each emitted result's error code (None: success), by call id."""
        return {r.call_id: r.error.code if r.error else None for r in self.results}

    async def cancel_when_waiting(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` (the framework's task) once the stuck tool runs."""
        await self.waiting.wait()
        scope.cancel()


@asynccontextmanager
async def code_scope(
    host: Host, setup: Callable[[ptc.ToolRuntime], object] | None = None
) -> AsyncIterator[ptc.Scope]:
    """A code-mode scope of a fresh runtime; ``setup(runtime)`` runs before the host's
    tools and listeners are installed."""
    async with ptc.ToolRuntime(
        approver=host.approver,
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
    ) as runtime:
        if setup is not None:
            setup(runtime)
        host.install(runtime)
        host.runtime = runtime
        agent = runtime.scope("agent")
        agent.present_as("code")
        await agent.prepare()
        yield agent
