"""The child's transport: ``call_batch`` over a real socketpair, the test playing the host.

A batch's cost is counted, never timed: the Python work (profiler events) a batch of n
calls makes in the calling thread must grow linearly in n.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from worker._child._transport import Channel, ChannelTransport
from worker._protocol._framing import Frame, FrameDecoder, encode
from worker._protocol._messages import CALLS_PER_FRAME, validate_child_frame


class Host:
    """The host's end: reads call frames, answers them in the order a test chooses."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(validate_child_frame)
        self.pending: list[Frame] = []

    def calls(self, count: int) -> list[dict[str, Any]]:
        """The next ``count`` calls the child sent (one or more call frames)."""
        found: list[dict[str, Any]] = []
        while len(found) < count:
            while not self.pending:
                self.pending = self.decoder.feed(self.sock.recv(65536))
            frame = self.pending.pop(0)
            assert frame["type"] == "call"
            found.extend(frame["calls"])
        return found

    def answer(self, calls: list[dict[str, Any]]) -> None:
        data = b"".join(
            encode({"type": "result", "id": c["id"], "ok": True, "value": c["arguments"]["i"]})
            for c in calls
        )
        self.sock.sendall(data)


@pytest.fixture
def pair() -> Iterator[tuple[ChannelTransport, Host]]:
    child, host = socket.socketpair()
    try:
        yield ChannelTransport(Channel(child), max_calls=1_000_000), Host(host)
    finally:
        child.close()
        host.close()


def batch(count: int) -> list[tuple[str, dict[str, Any]]]:
    return [("echo", {"i": i}) for i in range(count)]


def profiled_batch(transport: ChannelTransport, host: Host, count: int) -> int:
    """The profiler events of one batch of ``count`` calls in this thread, the host
    answering them in order (as it mostly does)."""

    def serve() -> None:
        host.answer(host.calls(count))

    server = threading.Thread(target=serve)
    server.start()
    events = 0

    def count_event(frame: FrameType, event: str, arg: object) -> None:
        nonlocal events
        events += 1

    sys.setprofile(count_event)
    try:
        answers = transport.call_batch(batch(count))
    finally:
        sys.setprofile(None)
    server.join()
    assert answers == [(True, i) for i in range(count)]
    return events


def test_a_batch_costs_work_linear_in_its_calls(pair: tuple[ChannelTransport, Host]) -> None:
    transport, host = pair
    small = profiled_batch(transport, host, 2_000)
    large = profiled_batch(transport, host, 8_000)
    # Linear: four times the calls, four times the work (with room for fixed costs);
    # waiting by rescanning the batch's ids after each answer (all answered so far are
    # found before the first missing one) made it sixteen times.
    assert large <= 5 * small, (small, large)


def test_concurrent_batches_each_get_their_own_answers_in_order(
    pair: tuple[ChannelTransport, Host],
) -> None:
    transport, host = pair
    got: dict[int, list[tuple[bool, Any]]] = {}

    def call(worker: int) -> None:
        got[worker] = transport.call_batch([("echo", {"i": worker * 1000 + i}) for i in range(50)])

    threads = [threading.Thread(target=call, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    calls = host.calls(200)
    host.answer(calls[::2][::-1] + calls[1::2])  # interleaved across batches, out of order
    for thread in threads:
        thread.join()
    assert got == {w: [(True, w * 1000 + i) for i in range(50)] for w in range(4)}
    assert sorted(c["id"] for c in calls) == list(range(1, 201))  # one id each, none reused


def test_a_failed_answer_comes_back_as_its_code_and_message(
    pair: tuple[ChannelTransport, Host],
) -> None:
    transport, host = pair

    def serve() -> None:
        (first, second) = host.calls(2)
        host.sock.sendall(
            encode({"type": "result", "id": second["id"], "ok": True, "value": 2})
            + encode(
                {"type": "result", "id": first["id"], "ok": False, "code": "DENIED",
                 "message": "no"}  # fmt: skip
            )
        )

    server = threading.Thread(target=serve)
    server.start()
    answers = transport.call_batch(batch(2))
    server.join()
    assert answers == [(False, ("DENIED", "no")), (True, 2)]


def call_frames(host: Host, count: int) -> list[Frame]:
    """The call frames the child sent for ``count`` calls."""
    frames: list[Frame] = []
    calls = 0
    while calls < count:
        while not host.pending:
            host.pending = host.decoder.feed(host.sock.recv(1 << 20))
        frames.append(host.pending.pop(0))
        calls += len(frames[-1]["calls"])
    return frames


def test_a_big_batch_spans_frames_of_bounded_size(pair: tuple[ChannelTransport, Host]) -> None:
    transport, host = pair
    count = 2 * CALLS_PER_FRAME + 3
    frames: list[Frame] = []

    def serve() -> None:
        frames.extend(call_frames(host, count))
        host.answer([c for f in frames for c in f["calls"]])

    server = threading.Thread(target=serve)
    server.start()
    answers = transport.call_batch(batch(count))
    server.join()
    assert answers == [(True, i) for i in range(count)]
    assert [len(f["calls"]) for f in frames] == [CALLS_PER_FRAME, CALLS_PER_FRAME, 3]
    assert [f.get("more") for f in frames] == [True, True, None]  # the last one ends it
    ids = [c["id"] for f in frames for c in f["calls"]]
    assert ids == list(range(1, count + 1))


def test_calls_too_big_for_one_frame_together_go_in_several(
    pair: tuple[ChannelTransport, Host],
) -> None:
    transport, host = pair
    big = "x" * (3 << 20)  # 3 MiB each: six of them are over the 16 MiB frame cap
    frames: list[Frame] = []

    def serve() -> None:
        frames.extend(call_frames(host, 6))
        calls = [c for f in frames for c in f["calls"]]
        one = [encode({"type": "result", "id": c["id"], "ok": True, "value": 1}) for c in calls]
        host.sock.sendall(b"".join(one))

    server = threading.Thread(target=serve)
    server.start()
    answers = transport.call_batch([("echo", {"s": big}) for _ in range(6)])
    server.join()
    assert answers == [(True, 1)] * 6
    assert len(frames) > 1 and all(f.get("more") for f in frames[:-1])
    assert [c["id"] for f in frames for c in f["calls"]] == [1, 2, 3, 4, 5, 6]


def test_a_call_over_the_per_call_cap_raises_and_sends_nothing(
    pair: tuple[ChannelTransport, Host],
) -> None:
    transport, host = pair
    with pytest.raises(ValueError, match="over the cap"):
        transport.call_batch([("echo", {"i": 1}), ("echo", {"s": "x" * (5 << 20)})])
    host.sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        host.sock.recv(1)
