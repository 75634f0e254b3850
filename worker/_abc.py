"""The one interface through which a host runs programs in workers.

Three implementations exist: :class:`worker.SubprocessBackend` (fresh contained child per
run, forked from a zygote), :class:`worker.ray.RayBackend` (each run on a node of a Ray
cluster, in that node's ``SubprocessBackend``; extra ``ptc[ray]``) and
:class:`worker.testing.FakeBackend` (in-process, no isolation, for tests of code built on
top of this interface).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import anyio

from ._types import CallReply, CallRequest, Dimension, Enforcement, RunOutcome, RunRequest


class CallHandler(Protocol):
    """Answers a batch of calls a program submitted together, replies in the same order.

    A batch of one is an ordinary call; ``.map`` and ``parallel`` submit larger batches.
    Several batches may be in flight at once (a program may call from threads). The
    handler must not raise for policy or tool failures (those are failed replies); an
    exception is a host bug: the run is killed and the exception propagates from ``run``.
    When a run ends while batches are still being handled, their tasks are cancelled and
    awaited before ``run`` returns.
    """

    async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]: ...


class CallBatch(Protocol):
    """A batch a program submitted, handed to :meth:`CallStarter.start` to answer later."""

    @property
    def calls(self) -> Sequence[CallRequest]:
        """The batch's calls, in the order the program made them."""
        ...

    async def reply(self, replies: Sequence[CallReply]) -> None:
        """Send the replies, in the order of :attr:`calls` (a no-op once the run ended)."""

    def fail(self, error: BaseException) -> None:
        """The handler broke (a host bug): kill the run and raise ``error`` from ``run``."""


@runtime_checkable
class CallStarter(CallHandler, Protocol):
    """A :class:`CallHandler` that answers batches from tasks of its own.

    A backend that receives one calls :meth:`start` as a batch arrives instead of starting
    a task per batch to await the handler: on the nested-call hot path that saves a task
    spawn and an event-loop round (``SubprocessBackend`` on asyncio handles the child's
    frames in the loop's reader callback then, so ``start`` may be called outside any task,
    where it must not start tasks or cancel scopes through anyio: anyio finds the running
    loop there only if ``anyio.run`` started it, once ``sniffio`` is installed).
    The handler owns those tasks (they may outlive ``run``), must not block in
    ``start``, and answers each batch exactly once through ``reply`` or ``fail``.
    """

    def start(self, batch: CallBatch) -> None:
        """Take ``batch`` and answer it later, from a task of the starter's own, with
        ``batch.reply`` (or ``batch.fail`` for a host bug); never block here."""
        ...


StdoutListener = Callable[[str], None]


class WorkerBackend(ABC):
    """Runs programs, one fresh worker per run, and reports how each was contained."""

    @abstractmethod
    async def run(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None = None,
        abort: anyio.Event | None = None,
        started: float | None = None,
    ) -> RunOutcome:
        """Run one program to its end and return a tagged outcome (never raises for it).

        The wall clock starts at ``started`` (a ``time.monotonic()`` value: a host counts
        its own work before the run, such as pre-flight, against ``wall_seconds``), or when
        this is called; a deadline already past is ``timeout`` at once. A program over
        ``MAX_PROGRAM_BYTES`` is ``preflight``. Setting ``abort`` kills the worker and
        returns kind ``abort`` with the output captured so far; cancelling the calling task
        kills the worker too (and re-raises the cancellation).
        """

    @abstractmethod
    def probe(self) -> Mapping[Dimension, Enforcement]:
        """What each dimension's enforcement would be on this host, without running code."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Warm up (start a zygote, fill a pool). Called lazily by ``run`` if needed."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop and reap every process this backend started. Idempotent."""

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:  # nothing it started may outlive a failed start
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
