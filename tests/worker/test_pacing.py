"""The pacer of the host's long loops: it yields to the event loop only once its slice is
used (turns of the loop counted, never timed: the slice is set to nothing or to ever)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from worker import Pacer
from worker._host import _pacing

pytestmark = pytest.mark.anyio


async def turns_while(ticks: int) -> int:
    """How many times another task ran while a loop ticked a pacer ``ticks`` times."""
    turns = 0
    done = False

    async def other() -> None:
        nonlocal turns
        while not done:
            await anyio.lowlevel.checkpoint()
            turns += 1

    async with anyio.create_task_group() as group:
        group.start_soon(other)
        await anyio.lowlevel.checkpoint()  # let it start
        started = turns
        pacer = Pacer()
        for _ in range(ticks):
            await pacer.tick()
        counted = turns - started
        done = True
    return counted


async def test_a_pacer_within_its_slice_never_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pacing, "SLICE_SECONDS", 3600.0)
    assert not Pacer().due()
    assert await turns_while(1000) == 0


async def test_a_pacer_past_its_slice_yields_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pacing, "SLICE_SECONDS", 0.0)
    assert Pacer().due()
    assert await turns_while(100) >= 99


def test_restart_begins_a_new_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    pacer = Pacer()
    monkeypatch.setattr(_pacing, "SLICE_SECONDS", 3600.0)
    pacer.restart()
    assert not pacer.due()
