"""The ``code/output`` event: a running program's output reaches listeners as it prints."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import anyio
import anyio.lowlevel
import pytest

import ptc
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime(
        default_mode="code",
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
    ) as runtime:
        yield runtime


async def test_listeners_get_each_chunk_while_the_program_still_runs(rt: ptc.ToolRuntime) -> None:
    seen = anyio.Event()
    chunks: list[Mapping[str, str]] = []

    def listener(chunk: Mapping[str, str]) -> None:
        chunks.append(chunk)
        if "first" in chunk["text"]:
            seen.set()

    @rt.tool
    async def after_first_chunk() -> str:
        """Return once the first line was seen by the host."""
        await seen.wait()  # would never return if output came only at the end
        return "ok"

    rt.root.on("code/output", listener)
    with anyio.fail_after(30):
        result = await rt.root.run_code(
            "print('first')\nx = tools.after_first_chunk()\nprint('then', x)", call_id="run-1"
        )
    assert not result.is_error, result.content
    assert [dict(c) for c in chunks] == [
        {"call_id": "run-1", "stream": "stdout", "text": "first\n"},
        {"call_id": "run-1", "stream": "stdout", "text": "then ok\n"},
    ]


async def test_async_listeners_see_the_chunks_in_order_before_run_code_returns(
    rt: ptc.ToolRuntime,
) -> None:
    texts: list[str] = []

    async def slow(chunk: Mapping[str, str]) -> None:
        await anyio.lowlevel.checkpoint()
        texts.append(chunk["text"])

    rt.on("code/output", slow)
    result = await rt.root.run_code("for i in range(5):\n    print(i)")
    assert not result.is_error
    assert "".join(texts) == "0\n1\n2\n3\n4\n"


async def test_a_scoped_listener_hears_only_its_subtree_and_errors_change_nothing(
    rt: ptc.ToolRuntime,
) -> None:
    heard: list[str] = []
    a, b = rt.scope("a"), rt.scope("b")
    a.on("code/output", lambda chunk: heard.append(chunk["text"]))

    def broken(chunk: Mapping[str, str]) -> None:
        raise RuntimeError("listener bug")

    b.on("code/output", broken)
    ok = await b.run_code("print('from b')\nreturn 1")
    assert not ok.is_error and ok.value == {"result": 1, "stdout": "from b\n"}
    await a.run_code("print('from a')")
    assert heard == ["from a\n"]


async def test_a_disposed_listener_hears_nothing(rt: ptc.ToolRuntime) -> None:
    heard: list[str] = []
    dispose = rt.on("code/output", lambda chunk: heard.append(chunk["text"]))
    dispose()
    await rt.root.run_code("print('x')")
    assert heard == []


@pytest.mark.parametrize("via", ["scope", "session"])
async def test_on_output_hears_one_call_only(rt: ptc.ToolRuntime, via: str) -> None:
    target: ptc.Scope | ptc.Session = rt.root if via == "scope" else rt.root.session()
    heard: list[str] = []

    async def one(chunk: Mapping[str, str]) -> None:
        heard.append(f"{chunk['call_id']}: {chunk['text']}")

    dispose = target.on_output("mine", one)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: rt.root.run_code("print('other')", call_id="other"))
        tg.start_soon(lambda: target.run_code("print('mine')", call_id="mine"))
    dispose()
    await target.run_code("print('mine again')", call_id="mine")
    assert heard == ["mine: mine\n"]
