"""The child's end of the channel and the SDK transport built on it.

:class:`Channel` serialises sends (stdout, log and call frames may come from several
threads). :class:`ChannelTransport` implements ``sdkgen.Transport.call_batch``: one
``call`` frame per batch (a batch over ``CALLS_PER_FRAME`` calls spans several, all but
the last marked ``more``), ids from 1 in submission order, and a leader/follower read
loop: whichever waiting thread finds no reader active reads frames and routes each
result to its caller by id, so a single-threaded program pays no thread hand-off.

When the host breaks the protocol or goes away there is no one left to report to: the
child exits at once (the host sees ``worker-exit`` or has already killed it).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from .._errors import ProtocolError
from .._protocol._framing import Frame, FrameReader, encode, json_problem, json_size
from .._protocol._messages import CALLS_PER_FRAME, MAX_CALL_ARGUMENTS_BYTES, validate_host_frame
from ._outcome import ProgramStop

_EXIT_HOST_GONE = 70


class Channel:
    """The child's socket: thread-safe sends, one reader at a time (the caller's job)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = FrameReader(sock, validate_host_frame)
        self._send_lock = threading.Lock()
        self._finished = False

    def send(self, frame: Frame) -> None:
        """Encode and send one frame (``ProtocolError``/``ValueError`` if it cannot be)."""
        self.send_encoded(encode(frame))

    def send_encoded(self, data: bytes) -> None:
        try:
            with self._send_lock:
                if not self._finished:
                    self._sock.sendall(data)
        except OSError:
            os._exit(_EXIT_HOST_GONE)

    def finish(self, data: bytes) -> None:
        """Send the last frame (``done``, encoded); frames from stray program threads after
        it are dropped, since anything after ``done`` is a protocol violation. Shutting the
        sending side down gives the host its end of stream at once (it need not wait for
        this process to exit)."""
        try:
            with self._send_lock:  # one critical section: no stray frame between the two
                if not self._finished:
                    self._sock.sendall(data)
                self._finished = True
                self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            os._exit(_EXIT_HOST_GONE)

    def recv(self) -> Frame:
        try:
            frame = self._reader.next()
        except (OSError, ProtocolError):
            os._exit(_EXIT_HOST_GONE)
        if frame is None:
            os._exit(_EXIT_HOST_GONE)
        return frame


def _call_frames(first: int, calls: list[tuple[str, dict[str, Any]]]) -> bytes:
    """A batch as ``call`` frames of at most :data:`CALLS_PER_FRAME` calls (ids from
    ``first``), every one but the last marked ``more``; ``ValueError`` when a call cannot be
    sent (its arguments over the per-call cap, or a frame of one call over the frame cap)."""
    parts: list[bytes] = []
    todo = [
        (first + i, calls[i : i + CALLS_PER_FRAME]) for i in range(0, len(calls), CALLS_PER_FRAME)
    ]
    todo.reverse()
    while todo:
        start, chunk = todo.pop()
        frame: Frame = {
            "type": "call",
            "calls": [
                {"id": start + i, "tool": tool, "arguments": arguments}
                for i, (tool, arguments) in enumerate(chunk)
            ],
        }
        if start + len(chunk) < first + len(calls):
            frame["more"] = True
        try:
            data = encode(frame)
        except ProtocolError as exc:  # these calls together over the frame cap: split them
            _check_sizes(chunk)
            if len(chunk) == 1:
                raise ValueError(f"this call is too large to send: {exc}") from None
            half = len(chunk) // 2
            todo += [(start + half, chunk[half:]), (start, chunk[:half])]
            continue
        if len(data) > MAX_CALL_ARGUMENTS_BYTES:
            # No call's arguments can be bigger than the (ASCII-escaped) frame: only a
            # large frame needs them measured one by one.
            _check_sizes(chunk)
        parts.append(data)
    return b"".join(parts)


def _check_sizes(calls: list[tuple[str, dict[str, Any]]]) -> None:
    for tool, arguments in calls:
        size = json_size(arguments)
        if size > MAX_CALL_ARGUMENTS_BYTES:
            raise ValueError(
                f"arguments of {tool!r} are {size} bytes as JSON, over the cap of "
                f"{MAX_CALL_ARGUMENTS_BYTES} bytes per call"
            )


class _Waiting:
    """One batch's answers as they arrive: a slot per call, and how many are still due."""

    __slots__ = ("answers", "due", "first")

    def __init__(self, first: int, count: int) -> None:
        self.first = first
        self.due = count
        self.answers: list[tuple[bool, Any]] = [(False, None)] * count


class ChannelTransport:
    """``call_batch`` over the channel; safe to call from several threads at once.

    Linear in the number of calls: each result goes straight to its batch's slot (a dict
    from call id to the waiting batch), and a batch waits on a count of answers still due,
    never by scanning its ids again. Waiting threads are woken only when a batch completes
    or the reader leaves, not per frame."""

    def __init__(
        self,
        channel: Channel,
        *,
        max_calls: int,
        before_call: Callable[[], None] = lambda: None,
        on_stop: Callable[[ProgramStop], None] = lambda stop: None,
    ) -> None:
        self._channel = channel
        self._max_calls = max_calls
        self._before_call = before_call
        self._on_stop = on_stop
        self._cond = threading.Condition()
        self._next_id = 1
        self._waiting: dict[int, _Waiting] = {}
        self._reading = False

    def call_batch(self, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
        for tool, arguments in calls:
            problem = json_problem(arguments)
            if type(tool) is not str or problem is not None:
                raise TypeError(f"arguments of {tool!r} must be JSON values: {problem}")
        if not calls:
            return []
        self._before_call()  # program output printed before the call reaches the host first
        with self._cond:
            first = self._next_id
            if first - 1 + len(calls) > self._max_calls:
                stop = ProgramStop(
                    "call-limit",
                    f"the program made more than {self._max_calls} tool calls (Limits.max_calls)",
                )
                self._on_stop(stop)
                raise stop
            data = _call_frames(first, calls)
            self._next_id = first + len(calls)
            waiting = _Waiting(first, len(calls))
            self._waiting.update(dict.fromkeys(range(first, first + len(calls)), waiting))
            # Sent while holding the lock, in one piece, so call frames leave in id order
            # and a batch's frames follow each other.
            self._channel.send_encoded(data)
            while waiting.due:
                if self._reading:
                    self._cond.wait()
                    continue
                self._read_until_done(waiting)
            return waiting.answers

    def _read_until_done(self, waiting: _Waiting) -> None:
        """Be the reader (the lock held on entry and exit, released while reading) until
        ``waiting`` has every answer; other batches completed meanwhile are woken."""
        self._reading = True
        try:
            while waiting.due:
                self._cond.release()
                try:
                    frame = self._channel.recv()
                finally:
                    self._cond.acquire()
                done = self._route(frame)
                if done is not None and done is not waiting:
                    self._cond.notify_all()
        finally:
            self._reading = False
            self._cond.notify_all()  # someone else still waiting reads from here on

    def _route(self, frame: Frame) -> _Waiting | None:
        """File one result in its batch; the batch when that was its last answer."""
        call_id: int = frame["id"] if frame["type"] == "result" else 0
        waiting = self._waiting.pop(call_id, None)
        if waiting is None:
            os._exit(_EXIT_HOST_GONE)  # the host answered something never asked: fatal
        if frame["ok"]:
            waiting.answers[call_id - waiting.first] = (True, frame["value"])
        else:
            waiting.answers[call_id - waiting.first] = (False, (frame["code"], frame["message"]))
        waiting.due -= 1
        return waiting if waiting.due == 0 else None
