"""The host's end of a keeper's socketpair: its JSON lines read (``_keeper_lines`` parses
them), the limits request and its answer, the exit report kept for whoever asks.

One JSON object per line; a keeper that breaks its protocol is a ``WorkerError`` and is
not waited for again. EOF from the keeper before its exit report means it is gone.
"""

from __future__ import annotations

import contextlib
from collections import deque

import anyio
from anyio.abc import SocketStream

from ._errors import WorkerError
from ._keeper_lines import ExitReport, KeeperLine, KeeperLineDecoder, LimitsAck, LimitsRequest


class KeeperChannel:
    """The keeper's lines of one child, as the host reads and writes them."""

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream
        self._lines = KeeperLineDecoder()
        self._pending_lines: deque[KeeperLine] = deque()
        self._exit: ExitReport | None = None
        self._cpu_limit_s = 0.0

    @property
    def exit(self) -> ExitReport | None:
        """The keeper's exit report, once it was read."""
        return self._exit

    @property
    def cpu_limit_s(self) -> float:
        """The RLIMIT_CPU the keeper applied for this run (0 when none was)."""
        return self._cpu_limit_s

    async def apply_limits(self, request: LimitsRequest) -> LimitsAck:
        """Have the keeper lower the child's CPU and address-space rlimits and set the
        scratch quota.

        Never raises: a keeper that is gone or breaks its protocol gives a not-applied
        answer that says why."""
        try:
            await self._stream.send(request.to_line())
            line = await self.next_line()
        except (WorkerError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            why = str(exc) or type(exc).__name__
            return LimitsAck(applied=False, error=why, cpu_limit_s=0, scratch_error=why)
        if not isinstance(line, LimitsAck):
            why = "keeper exited" if line is None else f"keeper sent {type(line).__name__}"
            return LimitsAck(applied=False, error=why, cpu_limit_s=0, scratch_error=why)
        if line.applied:
            self._cpu_limit_s = float(line.cpu_limit_s)
        return line

    async def wait_exit(self) -> ExitReport | None:
        """Read the keeper's lines up to its exit report (``None`` if it ends first).

        ``WorkerError`` if the keeper breaks its protocol."""
        while self._exit is None and await self.next_line() is not None:
            pass
        return self._exit

    async def next_line(self) -> KeeperLine | None:
        """The keeper's next line (``None`` once its socket ended); ``WorkerError`` if it
        breaks its protocol. An exit report is kept (:attr:`exit`)."""
        while not self._pending_lines:
            if self._lines.failed is not None:  # do not wait for more from a broken keeper
                raise self._lines.failed
            try:
                data = await self._stream.receive()
            except (
                anyio.EndOfStream,
                anyio.ClosedResourceError,
                anyio.BrokenResourceError,  # reset: the keeper died with our request unread
                OSError,
            ):
                return None
            self._pending_lines.extend(self._lines.feed(data))
        line = self._pending_lines.popleft()
        if isinstance(line, ExitReport):
            self._exit = line
        return line

    async def aclose(self) -> None:
        """Close the host's end (the keeper then kills the child, if it still runs)."""
        with contextlib.suppress(Exception):
            await self._stream.aclose()
