"""The supervisor line's protocol: every line round-trips; anything malformed is a
WorkerError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker._errors import WorkerError
from worker._protocol._keeper_lines import (
    MAX_LINE_BYTES,
    ExitReport,
    Hello,
    KeeperLine,
    KeeperLineDecoder,
    Killed,
    SetupFailed,
    SpawnFailed,
    parse_keeper_line,
)

FROM_KEEPER: list[KeeperLine] = [
    Hello(keeper_pid=10, child_pid=11),
    SpawnFailed(error="fork failed: [Errno 11] EAGAIN"),
    SetupFailed(step="chown the scratch dir", error="[Errno 1] Operation not permitted", errno=1),
    Killed(reason="the scratch dir holds more than 65536 files and directories"),
    ExitReport(status=9, cpu_ms=12.5, maxrss_kib=20_000),
    ExitReport(status=9, cpu_ms=1950.0, maxrss_kib=20_000, cpu_clock_s=2.01),
]


@pytest.mark.parametrize("line", FROM_KEEPER)
def test_keeper_lines_round_trip(line: KeeperLine) -> None:
    wire = line.to_line()
    assert wire.endswith(b"\n") and wire.count(b"\n") == 1
    assert parse_keeper_line(wire[:-1]) == line


def test_the_wire_keys_are_the_documented_ones() -> None:
    assert Hello(keeper_pid=1, child_pid=2).to_line() == b'{"keeper":1,"child":2}\n'
    assert ExitReport(status=0, cpu_ms=1.0, maxrss_kib=3).to_line() == (
        b'{"exit":0,"cpu_ms":1.0,"maxrss_kib":3,"cpu_clock_s":0.0}\n'
    )
    assert Killed(reason="why").to_line() == b'{"killed":"why"}\n'


@pytest.mark.parametrize(
    ("err", "lasting"),
    [(1, True), (13, True), (38, True), (12, False), (11, False), (24, False), (0, False)],
)
def test_a_setup_failure_is_lasting_unless_it_is_exhaustion(err: int, lasting: bool) -> None:
    line = SetupFailed(step="chown the scratch dir", error="[Errno 1] no", errno=err)
    assert line.lasting is lasting
    assert line.describe() == "the child could not chown the scratch dir: [Errno 1] no"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"", "not JSON"),
        (b"{nope", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"keeper": 1}', "unknown fields"),
        (b'{"keeper": 1, "child": 2, "x": 3}', "unknown fields"),
        (b'{"keeper": "1", "child": 2}', "'keeper' has the wrong type"),
        (b'{"keeper": true, "child": 2}', "'keeper' has the wrong type"),
        (b'{"exit": 0, "cpu_ms": "1", "maxrss_kib": 3, "cpu_clock_s": 0}', "'cpu_ms'"),
        (b'{"exit": 9, "cpu_ms": 1, "maxrss_kib": 3, "cpu_clock_s": true}', "'cpu_clock_s'"),
        (b'{"exit": 9, "cpu_ms": 1, "maxrss_kib": 3}', "unknown fields"),
        (b'{"killed": 1}', "'killed'"),
        (b'{"error": null}', "'error'"),
        (b'{"exit": 9, "cpu_ms": NaN, "maxrss_kib": 3, "cpu_clock_s": 0}', "not JSON"),
        (b'{"exit": 9, "cpu_ms": 1, "maxrss_kib": 3, "cpu_clock_s": Infinity}', "not JSON"),
        (b'{"keeper": 1, "child": 2, "child": 3}', "not JSON"),
        (b'{"killed": "\xff"}', "not JSON"),
    ],
)
def test_malformed_keeper_lines_are_worker_errors(line: bytes, needle: str) -> None:
    with pytest.raises(WorkerError, match=needle):
        parse_keeper_line(line)


def test_a_line_that_is_not_json_is_never_written() -> None:
    """The lines are written with the frames' encoder: NaN is refused as it is in a frame."""
    with pytest.raises(ValueError, match="JSON compliant"):
        ExitReport(status=9, cpu_ms=float("nan"), maxrss_kib=1).to_line()


def test_the_decoder_reassembles_lines_split_at_every_byte() -> None:
    data = b"".join(line.to_line() for line in FROM_KEEPER)
    decoder = KeeperLineDecoder()
    out: list[KeeperLine] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    assert out == FROM_KEEPER


def test_the_decoder_stays_broken_after_a_bad_line() -> None:
    decoder = KeeperLineDecoder()
    with pytest.raises(WorkerError):
        decoder.feed(b"garbage\n")
    with pytest.raises(WorkerError):
        decoder.feed(Hello(keeper_pid=1, child_pid=2).to_line())


def test_an_endless_line_is_refused() -> None:
    with pytest.raises(WorkerError, match="longer than"):
        KeeperLineDecoder().feed(b"x" * (MAX_LINE_BYTES + 1))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_ever_raise_worker_error(data: bytes) -> None:
    try:
        KeeperLineDecoder().feed(data)
    except WorkerError:
        pass
