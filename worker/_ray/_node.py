"""The node side of ``worker.ray``: one long-lived Ray actor per node owning that node's
:class:`~worker.SubprocessBackend`.

Containment, limits, the kill and the enforcement report are therefore exactly the local
worker's on that node. The actor never decides policy: a program's calls are streamed to
the host as ``calls`` events and wait for the host's replies (:meth:`NodeService.reply`).
Everything in and out is JSON text (:mod:`worker._ray._wire`).

A run is an async generator method: it yields JSON event lists as they happen (``calls``,
``stdout``, ``log``) and ends with the ``outcome``. The program runs in its own asyncio
task so that the generator never yields from inside a cancel scope; closing the generator
(the host went away) cancels that task, which kills the child, as cancelling a local run
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Sequence

import anyio
import ray

# The package's public names only: the local backend's modules are being reorganised.
from .. import ProtocolError, SubprocessBackend, WorkerError
from .._types import CallReply, CallRequest, RunOutcome, RunRequest
from ._wire import (
    Event,
    calls_event,
    decode_containment,
    decode_replies,
    decode_request,
    encode_events,
    outcome_event,
)

_CURRENT: contextvars.ContextVar[_NodeRun | None] = contextvars.ContextVar(
    "ptc_ray_run", default=None
)
_EARLY_CANCELS = 1024


class _NodeRun:
    """One run's state on the node: queued events, batches awaiting the host, the abort."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.wake = asyncio.Event()
        self.pending: dict[int, asyncio.Future[list[CallReply]]] = {}
        self.batches = 0
        self.abort = anyio.Event()

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.wake.set()

    async def drain(self) -> list[Event]:
        while not self.events:
            self.wake.clear()
            await self.wake.wait()
        events, self.events = self.events, []
        return events

    def on_stdout(self, text: str) -> None:
        self.emit({"type": "stdout", "data": text})

    async def on_calls(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        self.batches += 1
        batch = self.batches
        answer: asyncio.Future[list[CallReply]] = asyncio.get_running_loop().create_future()
        self.pending[batch] = answer
        self.emit(calls_event(batch, calls))
        try:
            replies = await answer
        finally:
            self.pending.pop(batch, None)
        if len(replies) != len(calls):
            raise ProtocolError(f"{len(replies)} replies for {len(calls)} calls")
        return replies

    def answer(self, replies_json: str) -> None:
        """Hand the host's replies to the batch waiting for them. Replies that cannot be
        read fail every waiting batch: the run then ends as ``protocol``."""
        try:
            batch, replies = decode_replies(replies_json)
        except ProtocolError as exc:
            for waiting in self.pending.values():
                if not waiting.done():
                    waiting.set_exception(exc)
            return
        answer = self.pending.get(batch)
        if answer is not None and not answer.done():
            answer.set_result(replies)


class _Forward(logging.Handler):
    """Sends ``ptc.worker`` records of the current run to its host as ``log`` events."""

    def emit(self, record: logging.LogRecord) -> None:
        run = _CURRENT.get()
        if run is None:
            return
        run.emit(
            {
                "type": "log",
                "record": {
                    "name": record.name,
                    "levelno": record.levelno,
                    "levelname": record.levelname,
                    "msg": record.getMessage(),
                    "created": record.created,
                },
            }
        )


def _install_forwarder() -> None:
    logger = logging.getLogger("ptc.worker")
    if not any(isinstance(h, _Forward) for h in logger.handlers):
        logger.addHandler(_Forward())


class NodeService:
    """The actor (``ray.remote(NodeService)``): every argument and result is JSON text."""

    def __init__(self, containment_json: str) -> None:
        self._backend = SubprocessBackend(decode_containment(containment_json))
        self._runs: dict[str, _NodeRun] = {}
        self._early_cancels: deque[str] = deque(maxlen=_EARLY_CANCELS)
        _install_forwarder()

    async def start(self) -> str:
        """Start the zygote and pool; report where this actor runs and what it enforces."""
        error = ""
        try:
            await self._backend.start()
        except WorkerError as exc:
            error = str(exc)
        return json.dumps(
            {
                "node_id": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid(),
                "zygote_pid": self._backend.zygote_pid,
                "probe": {dim: e.as_json() for dim, e in self._backend.probe().items()},
                "error": error,
            }
        )

    async def status(self) -> str:
        return json.dumps(
            {
                "pid": os.getpid(),
                "zygote_pid": self._backend.zygote_pid,
                "runs": len(self._runs),
            }
        )

    async def run(self, run_id: str, request_json: str) -> AsyncIterator[str]:
        """Run one program; yields JSON event lists, the last one holding the outcome."""
        state = _NodeRun()
        try:
            request = decode_request(request_json)
        except ProtocolError as exc:
            failed = RunOutcome(ok=False, kind="protocol", detail=f"bad run request: {exc}")
            yield encode_events([outcome_event(failed)])
            return
        if run_id in self._early_cancels:
            state.abort.set()
        self._runs[run_id] = state
        # Cancelled through an anyio scope, never Task.cancel: the run's own cleanup (the
        # child's close, shielded) must run to its end even when the caller goes away.
        scope = anyio.CancelScope()

        async def execute() -> None:
            with scope:
                await self._execute(state, request)

        task = asyncio.ensure_future(execute())
        try:
            while True:
                events = await state.drain()
                yield encode_events(events)
                if events[-1]["type"] == "outcome":
                    return
        finally:
            self._runs.pop(run_id, None)
            if not task.done():
                scope.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _execute(self, state: _NodeRun, request: RunRequest) -> None:
        _CURRENT.set(state)  # this task's own context: its log records go to this run
        try:
            outcome = await self._backend.run(
                request, on_calls=state.on_calls, on_stdout=state.on_stdout, abort=state.abort
            )
        except ProtocolError as exc:
            outcome = RunOutcome(ok=False, kind="protocol", detail=f"bad replies: {exc.detail}")
        except Exception as exc:  # the node's backend failed: report it, keep serving
            detail = f"the worker backend on this node failed: {exc!r}"
            outcome = RunOutcome(ok=False, kind="worker-exit", detail=detail)
        state.emit(outcome_event(outcome))

    async def reply(self, run_id: str, replies_json: str) -> None:
        """The host's answers to one batch of calls (ignored once the run is over)."""
        state = self._runs.get(run_id)
        if state is not None:
            state.answer(replies_json)

    async def cancel(self, run_id: str) -> None:
        """Kill the run's program (it ends as ``abort``); may arrive before the run."""
        state = self._runs.get(run_id)
        if state is None:
            self._early_cancels.append(run_id)
        else:
            state.abort.set()

    async def close(self) -> None:
        """Abort every run, stop the zygote and the pool and reap them."""
        for state in self._runs.values():
            state.abort.set()
        await self._backend.aclose()
