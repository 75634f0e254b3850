"""Suspend and resume on real contained workers: the worker is gone while a person decides,
and a fresh one replays the program."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from tests._typing import data

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]

PROGRAM = """\
print("reading")
a = tools.read(n=4)
w = tools.write(n=a)
print("wrote")
return {"read": a, "write": w}
"""


class Host:
    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()

    async def approver(self, request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        return "deferred"

    def runtime(self, **options: Any) -> ptc.ToolRuntime:
        runtime = ptc.ToolRuntime(default_mode="code", approver=self.approver, **options)
        ran = self.ran

        @runtime.tool
        def read(n: int) -> int:
            """Read."""
            ran["read"] += 1
            return n + 1

        @runtime.tool
        def write(n: int) -> str:
            """Write (asks first)."""
            ran["write"] += 1
            return f"wrote {n}"

        async def ask_before_writes(execution: ptc.ToolExecution, nxt: Any) -> Any:
            return ptc.Ask("write?") if execution.name == "write" else await nxt()

        runtime.on("tools/pre-execute", ask_before_writes)
        return runtime


async def test_a_real_run_suspends_with_its_worker_gone_and_resumes_in_a_fresh_one(
    tmp_path: Path,
) -> None:
    host = Host()
    store = ptc.FileSuspensionStore(tmp_path)
    async with host.runtime(suspensions=store, limits=ptc.Limits(wall_seconds=2)) as rt:
        suspended = await rt.root.run_code(PROGRAM)
        assert suspended.error is not None and suspended.error.code == "SUSPENDED"
        meta = data(suspended.meta)
        assert {e["level"] for e in meta["enforcement"].values()} == {"full"}
        assert "wrote" not in data(suspended.content)[0]["text"]
        token = meta["suspension"]["token"]
        # Longer than the run's whole wall clock: nothing is waiting for the person.
        await anyio.sleep(2.5)
    # A restarted host: a new runtime, a new zygote, the same store.
    again = Host()
    async with again.runtime(suspensions=ptc.FileSuspensionStore(tmp_path)) as rt:
        result = await rt.root.resume(token, "allowed-once")
    assert not result.is_error, result.content
    assert data(result.value) == {
        "result": {"read": 5, "write": "wrote 5"},
        "stdout": "reading\nwrote\n",
    }
    assert host.ran == Counter({"read": 1}) and again.ran == Counter({"write": 1})
    log = data(result.meta)["dispatch_log"]
    assert [(e["name"], e["replayed"]) for e in log] == [("read", True), ("write", False)]
