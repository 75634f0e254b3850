"""CancelSignal and signal fusion."""

from __future__ import annotations

import anyio
import pytest

from ptc import CancelSignal
from ptc._signals import fuse


def test_cancel_sets_flag_and_first_reason_sticks() -> None:
    signal = CancelSignal()
    assert (signal.cancelled, signal.reason) == (False, None)
    signal.cancel("first")
    signal.cancel("second")
    assert signal.reason == "first"
    assert signal.cancelled


@pytest.mark.anyio
async def test_wait_returns_once_fired() -> None:
    signal = CancelSignal()
    woke = anyio.Event()

    async def waiter() -> None:
        await signal.wait()
        woke.set()

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert not woke.is_set()
        signal.cancel()
    assert woke.is_set()
    await signal.wait()  # already fired: returns at once


@pytest.mark.parametrize("which", [0, 1])
def test_fused_signal_fires_when_any_source_fires(which: int) -> None:
    sources = [CancelSignal(), CancelSignal()]
    fused, _ = fuse(*sources)
    sources[which].cancel(f"source {which}")
    assert fused.cancelled and fused.reason == f"source {which}"


def test_fusing_an_already_fired_source_fires_at_once() -> None:
    source = CancelSignal()
    source.cancel("early")
    fused, _ = fuse(None, source)
    assert fused.cancelled and fused.reason == "early"


def test_detach_stops_relaying_and_leaves_no_callbacks() -> None:
    source = CancelSignal()
    fused, detach = fuse(source)
    detach()
    detach()
    source.cancel()
    assert not fused.cancelled
    assert source._callbacks == []


def test_fused_signal_does_not_fire_its_sources() -> None:
    source = CancelSignal()
    fused, _ = fuse(source)
    fused.cancel()
    assert not source.cancelled
