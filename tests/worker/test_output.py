"""OutputCapture: head and tail around a marker, UTF-8 safe, and the stream cap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker import OutputCapture


def test_short_output_is_kept_whole() -> None:
    cap = OutputCapture(output_bytes=100, stream_bytes=1000)
    assert cap.feed("hello ") and cap.feed("world\n")
    out = cap.output()
    assert (out.text, out.total_bytes, out.truncated) == ("hello world\n", 12, False)


def test_long_output_keeps_head_and_tail_around_a_marker() -> None:
    cap = OutputCapture(output_bytes=10, stream_bytes=1000)
    cap.feed("0123456789" * 3)
    out = cap.output()
    assert out.truncated and out.total_bytes == 30
    assert out.text == "01234\n... [20 bytes omitted] ...\n56789"


def test_feed_reports_the_stream_cap() -> None:
    cap = OutputCapture(output_bytes=4, stream_bytes=10)
    assert cap.feed("x" * 10)
    assert not cap.feed("y")
    assert cap.output().total_bytes == 11


def test_multibyte_characters_are_never_split() -> None:
    cap = OutputCapture(output_bytes=7, stream_bytes=1000)
    cap.feed("é" * 20)  # 2 bytes each: head 3 bytes, tail 4 bytes
    out = cap.output()
    head, _, tail = out.text.partition("\n... [")
    assert head == "é" and tail.endswith("éé")
    assert "\ufffd" not in out.text
    assert "[34 bytes omitted]" in out.text


def test_lone_surrogates_do_not_break_capture() -> None:
    cap = OutputCapture(output_bytes=100, stream_bytes=1000)
    assert cap.feed("a\ud800b")
    assert cap.output().text.startswith("a")


def test_invalid_sizes_are_rejected() -> None:
    with pytest.raises(ValueError):
        OutputCapture(output_bytes=0, stream_bytes=10)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=20), st.integers(1, 60))
def test_capture_is_exact_or_a_faithful_head_and_tail(chunks: list[str], limit: int) -> None:
    cap = OutputCapture(output_bytes=limit, stream_bytes=10**6)
    for chunk in chunks:
        cap.feed(chunk)
    whole = "".join(chunks)
    out = cap.output()
    data = whole.encode("utf-8", "surrogatepass")
    assert out.total_bytes == len(data)
    if len(data) <= limit:
        assert not out.truncated
        assert out.text == data.decode("utf-8", "replace")
    else:
        head, marker, tail = out.text.partition("\n... [")
        assert out.truncated and marker
        tail = tail.split("] ...\n", 1)[1]
        assert data.decode("utf-8", "replace").startswith(head)
        assert data.decode("utf-8", "replace").endswith(tail)
        assert (
            len(head.encode("utf-8", "surrogatepass")) + len(tail.encode("utf-8", "surrogatepass"))
            <= limit
        )
