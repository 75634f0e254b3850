"""The host's end of a child's supervisor line: its JSON lines read (``_keeper_lines``
parses them), and what they said kept for whoever asks: the child's setup failure, the
scratch keeper's reason for killing it, the zygote's exit report.

One JSON object per line; a line that breaks the protocol is a ``WorkerError`` and the line
is not read again. EOF before the exit report means the zygote is gone.

Read from the raw socket with ``anyio.wait_readable`` (like the run channel), not through
an anyio stream: on asyncio, a stream's read cancelled at the moment its socket became
readable fails in the event loop's callback (``InvalidStateError``), which is what
cancelling a child's priming while the zygote answers does.
"""

from __future__ import annotations

import socket
from collections import deque

import anyio
import anyio.lowlevel

from .._protocol._keeper_lines import ExitReport, KeeperLine, KeeperLineDecoder, Killed, SetupFailed
from ._run_channel import close_watched


class KeeperChannel:
    """The supervisor line of one child, as the host reads it."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._lines = KeeperLineDecoder()
        self._pending_lines: deque[KeeperLine] = deque()
        self._exit: ExitReport | None = None
        self.setup_failed: SetupFailed | None = None
        """The step of its own setup the child could not take, if it said one."""
        self.killed = ""
        """Why the scratch keeper killed the child ("" unless it did)."""

    @property
    def exit(self) -> ExitReport | None:
        """The zygote's exit report, once it was read."""
        return self._exit

    async def wait_exit(self) -> ExitReport | None:
        """Read the lines up to the exit report (``None`` if the line ends first).

        ``WorkerError`` if the line breaks its protocol."""
        while self._exit is None and await self.next_line() is not None:
            pass
        return self._exit

    async def next_line(self) -> KeeperLine | None:
        """The next line (``None`` once the socket ended); ``WorkerError`` if it breaks its
        protocol. What it says is kept (:attr:`exit`, :attr:`setup_failed`, :attr:`killed`)."""
        while not self._pending_lines:
            if self._lines.failed is not None:  # do not wait for more from a broken line
                raise self._lines.failed
            data = await self._receive()
            if not data:
                return None
            self._pending_lines.extend(self._lines.feed(data))
        line = self._pending_lines.popleft()
        if isinstance(line, ExitReport):
            self._exit = line
        elif isinstance(line, SetupFailed):
            self.setup_failed = line
        elif isinstance(line, Killed):
            self.killed = line.reason
        return line

    async def _receive(self) -> bytes:
        """One read, waiting for readiness if nothing is there; ``b""`` at the end of the
        line (EOF, a reset, or the socket closed here)."""
        while True:
            if self._sock.fileno() < 0:
                return b""
            try:
                data = self._sock.recv(65536)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self._sock)
                except (anyio.ClosedResourceError, OSError):
                    return b""
                continue
            except OSError:
                return b""
            await anyio.lowlevel.checkpoint()  # data without waiting: still yield once
            return data

    async def aclose(self) -> None:
        """Close the host's end (a read waiting on it ends as at EOF)."""
        close_watched(self._sock)
