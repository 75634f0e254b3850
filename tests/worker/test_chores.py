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


async def test_a_cancelled_chore_finishes_its_shielded_cleanup() -> None:
    """Cancelling a kind goes through anyio's cancel scope, so the cleanup a chore does
    under a shield (closing a child: both sockets, its cgroups) is never cut in half."""
    chores = Chores()
    steps: list[str] = []

    async def priming() -> None:
        try:
            with anyio.fail_after(60):  # as a child's handshake waits for its lines
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                for step in ("run channel", "supervisor line"):
                    await anyio.lowlevel.checkpoint()  # a native cancel would land here
                    steps.append(step)

    assert chores.start(priming, "priming")
    await anyio.lowlevel.checkpoint()
    chores.cancel("priming")
    with anyio.fail_after(30):  # only a guard against a hang, never a timing bound
        await chores.wait()
    assert steps == ["run channel", "supervisor line"]


async def test_a_chore_cancelled_before_it_ran_still_runs_its_cleanup() -> None:
    chores = Chores()
    ended: list[str] = []

    async def priming() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("priming")

    assert chores.start(priming, "priming")
    chores.cancel("priming")  # before the task took its first step
    with anyio.fail_after(30):
        await chores.wait()
    assert ended == ["priming"]
