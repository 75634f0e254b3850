"""Detached tasks and groups: jobs that outlive their starter, ended together (asyncio
tasks of the loop, or trio system tasks: both backends)."""

from __future__ import annotations

import logging

import anyio
import anyio.lowlevel
import pytest

from ptc._detached import DetachedGroup
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends

pytestmark = pytest.mark.anyio
GUARD_S = 10  # turns a broken handshake into a failure instead of a hang


async def test_sequential_jobs_reuse_one_task_and_overlapping_ones_get_their_own() -> None:
    group = DetachedGroup("test")
    tasks: list[int] = []
    release = anyio.Event()

    async def job(wait: bool) -> None:
        tasks.append(anyio.get_current_task().id)
        if wait:
            await release.wait()

    for _ in range(3):  # one at a time: each ends before the next starts
        group.start_soon(job, False)
        await anyio.wait_all_tasks_blocked()  # the job ran; its task waits for the next
    assert len(tasks) == 3 and len(set(tasks)) == 1
    group.start_soon(job, True)
    group.start_soon(job, True)  # overlaps the one still waiting
    await anyio.wait_all_tasks_blocked()
    assert len(tasks) == 5 and len(set(tasks[3:])) == 2
    assert not group.done.is_set()
    group.close()
    assert not group.done.is_set()  # closed, but jobs still run
    release.set()
    with anyio.fail_after(GUARD_S):
        await group.done.wait()


async def test_an_empty_closed_group_is_done_and_refuses_jobs() -> None:
    group = DetachedGroup("test")
    group.close()
    assert group.done.is_set()

    async def job() -> None:
        pass

    with pytest.raises(RuntimeError, match="closed"):
        group.start_soon(job)


async def test_cancel_reaches_running_and_idle_tasks_but_a_shielded_part_finishes() -> None:
    group = DetachedGroup("test")
    events: list[str] = []
    shielded_started = anyio.Event()
    proceed = anyio.Event()

    async def plain() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            events.append("plain cancelled")
            raise

    async def shielded() -> None:
        with anyio.CancelScope(shield=True):
            shielded_started.set()
            await proceed.wait()  # let go only after the cancel
            events.append("shielded finished")

    async def quick() -> None:
        pass

    group.start_soon(quick)
    await anyio.wait_all_tasks_blocked()  # its task now waits, idle, for a next job
    group.start_soon(plain)  # takes the idle task
    group.start_soon(shielded)
    await shielded_started.wait()
    group.cancel()
    group.close()
    await anyio.wait_all_tasks_blocked()
    assert events == ["plain cancelled"] and not group.done.is_set()
    proceed.set()
    with anyio.fail_after(GUARD_S):
        await group.done.wait()
    assert events == ["plain cancelled", "shielded finished"]

    # A job started after cancel() is cancelled at once (the group is not closed yet).
    later = DetachedGroup("test")
    later.cancel()
    ran: list[str] = []

    async def records() -> None:
        await anyio.lowlevel.checkpoint()
        ran.append("ran")

    later.start_soon(records)
    later.close()
    with anyio.fail_after(GUARD_S):
        await later.done.wait()
    assert ran == []


async def test_a_failing_job_is_logged_and_the_group_still_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = DetachedGroup("test-group")

    async def broken() -> None:
        raise LookupError("job bug")

    with caplog.at_level(logging.ERROR, logger="ptc"):
        group.start_soon(broken)
        group.close()
        with anyio.fail_after(GUARD_S):
            await group.done.wait()
    assert "detached task test-group failed" in caplog.text
    assert "job bug" in caplog.text
