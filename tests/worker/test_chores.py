"""Background chores of the pool: run as tasks of their own, awaited, cancelled by kind."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from worker._host._chores import Chores

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # chores are asyncio tasks (elsewhere the caller does the work inline)


async def test_cancelling_one_kind_leaves_the_others_to_finish() -> None:
    chores = Chores()
    ended: list[str] = []
    gate = anyio.Event()

    async def priming() -> None:
        try:
            await anyio.sleep_forever()  # a hello that never comes
        finally:
            ended.append("priming")

    async def teardown() -> None:
        await gate.wait()
        ended.append("teardown")

    assert chores.start(priming, "priming") and chores.start(teardown, "teardown")
    await anyio.lowlevel.checkpoint()
    chores.cancel("priming")
    gate.set()
    with anyio.fail_after(30):  # only a guard against a hang, never a timing bound
        await chores.wait()
    assert sorted(ended) == ["priming", "teardown"]
