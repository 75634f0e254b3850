"""How many JSON values a message holds, counted on its raw bytes before anything parses it
(``ptc.mcp._values``): never fewer than the parser finds, however the text is written or cut
into pieces, and commas, brackets, quotes and backslashes inside strings never count."""

from __future__ import annotations

import codecs
import json
from typing import Any

import pydantic_core
import pytest
from httpx2._sse import ServerSentEvent, _SSEParser
from hypothesis import given, settings
from hypothesis import strategies as st

from ptc.mcp._values import JsonValues, SseValues

# Text that tries to look like JSON structure: every character the counter looks at.
tricky_text = st.text(
    st.sampled_from(list('",[]{}:\\/ \n\t\r') + ["a", "é", "\u2028", "\x00"]) | st.characters(),
    max_size=12,
)
leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | tricky_text
documents: st.SearchStrategy[Any] = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(tricky_text, inner, max_size=5),
    max_leaves=40,
)
writings = st.fixed_dictionaries(
    {
        "ensure_ascii": st.booleans(),
        "indent": st.none() | st.integers(0, 2),
        "separators": st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")]),
    }
)


def values_in(value: Any) -> int:
    """The values a parsed document holds: itself and, inside it, every element and member
    value (keys are not values)."""
    if isinstance(value, list):
        return 1 + sum(values_in(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(values_in(item) for item in value.values())
    return 1


def encoded(document: Any, writing: dict[str, Any]) -> bytes:
    text = json.dumps(document, **writing)
    return text.encode("utf-8", "surrogatepass")


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]


def counted(data: bytes, cuts: list[int]) -> int:
    counter = JsonValues()
    for piece in pieces(data, cuts):
        counter.feed(piece)
    return counter.values


@settings(max_examples=400)
@given(document=documents, writing=writings, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_the_count_is_never_below_the_values_the_parser_finds(
    document: Any, writing: dict[str, Any], cuts: list[int]
) -> None:
    data = encoded(document, writing)
    parsed = json.loads(data.decode("utf-8", "surrogatepass"))
    assert counted(data, cuts) >= values_in(parsed)
    try:  # the parser a mount uses (it refuses lone surrogates)
        parsed = pydantic_core.from_json(data.decode("utf-8", "replace"))
    except ValueError:
        return
    assert counted(data, cuts) >= values_in(parsed)


@settings(max_examples=300)
@given(document=documents, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_compact_json_in_one_piece_is_counted_exactly(document: Any, cuts: list[int]) -> None:
    data = encoded(document, {"separators": (",", ":"), "ensure_ascii": False})
    assert counted(data, []) == values_in(document)
    # Cut anywhere, at most one more per cut (an empty [] or {} cut in two).
    assert values_in(document) <= counted(data, cuts) <= values_in(document) + len(cuts)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (b"0", 1),
        (b"[]", 1),
        (b"[ ]", 2),  # space inside an empty container: one too many, never too few
        (b'[0,[],{},{"a":[1,2]}]', 8),
        (b'{"csv":"a,b,[c],{d}\\n1,2,3"}', 2),
        (b'["\\\\",",",["\\"",[]]]', 6),  # an escaped backslash closes its string
        (b'"an unterminated string, [0,0,0]', 1),
    ],
)
def test_known_texts(text: bytes, values: int) -> None:
    assert counted(text, []) == values
    assert counted(text, list(range(len(text)))) >= min(values, counted(text, []))


def test_an_escape_cut_from_its_byte_by_an_empty_piece_still_applies() -> None:
    counter = JsonValues()
    for piece in [b'["a\\', b"", b'"', b",", b'[0]"]']:
        counter.feed(piece)
    assert counter.values == 2  # ["a\",[0]"]: one string in an array


def test_a_text_block_of_commas_and_brackets_counts_as_one_value() -> None:
    csv = ("id,name,tags\\n" + '7,\\"a, b\\",[x]\\n' * 50_000).encode()
    reply = b'{"content":[{"type":"text","text":"' + csv + b'"}]}'
    # Fed as a transport reads it: 64 KiB at a time, escapes cut anywhere.
    assert counted(reply, list(range(0, len(reply), 1 << 16))) == 5  # the text is one


# -- server-sent events --------------------------------------------------------------------

line_ends = st.sampled_from(["\n", "\r\n", "\r"])
# Lines the SSE parser does not hand to the JSON parser, full of quotes and brackets.
other_lines = st.sampled_from(
    [': "comment [', "event: message", 'id: "7', "retry: 10", "datax: [0,0,0]", ': data: "']
)


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """An SSE body and the values of each event's JSON: each event's JSON written over
    several ``data:`` lines (cut at its own line breaks, which the SSE parser joins back
    with ``\\n``), other lines between them, any line endings."""
    lines: list[str] = []
    counts: list[int] = []
    for document in draw(st.lists(documents, min_size=1, max_size=4)):
        text = json.dumps(document, indent=draw(st.none() | st.integers(0, 1)))
        counts.append(values_in(document))
        for part in text.split("\n"):
            lines += draw(st.lists(other_lines, max_size=2))
            space = draw(st.sampled_from(["", " "]))
            lines.append(f"data:{space}{part}")
        lines.append("")  # a blank line ends the event
    body = ""
    for line in lines:
        end = draw(line_ends)
        if not line and body.endswith("\r") and end.startswith("\n"):
            end = "\r"  # \r then \n would be one line end, not an end and a blank line
        body += line + end
    return body.encode("utf-8", "surrogatepass"), counts


def sdk_events(body: bytes, cuts: list[int]) -> list[str]:
    """The data of each event the SDK's SSE parser (httpx2's, as the MCP client runs it)
    hands on, fed the body's text in the same pieces."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parser = _SSEParser()
    events: list[ServerSentEvent] = []
    for piece in pieces(body, cuts):
        events += parser.decode(decoder.decode(piece))
    events += parser.decode(decoder.decode(b"", final=True))
    events += parser.flush()
    return [event.data for event in events if event.data]


@settings(max_examples=300)
@given(stream=event_streams(), cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_no_event_holds_more_values_than_counted(
    stream: tuple[bytes, list[int]], cuts: list[int]
) -> None:
    body, counts = stream
    counter = SseValues()
    for piece in pieces(body, cuts):
        counter.feed(piece)
    assert counter.largest >= max(counts)
    events = sdk_events(body, cuts)
    assert [values_in(json.loads(data)) for data in events] == counts
    assert counter.largest >= max(values_in(json.loads(data)) for data in events)


def test_an_event_stream_parsed_as_the_sdk_does() -> None:
    body = (
        b': "\r\nevent: message\r\nid: "1\r\ndata: [0,\r\ndata:0,"a,b"]\r\n\r\n'
        b"data\ndata: 1\n\ndata: [[],[]]\n\n"
    )
    assert [values_in(json.loads(data)) for data in sdk_events(body, [])] == [4, 1, 3]
    whole = SseValues()
    whole.feed(body)
    assert whole.largest == 4
    bytewise = SseValues()
    for byte in range(len(body)):  # every split of \r\n included
        bytewise.feed(body[byte : byte + 1])
    # Each [] of the last event, cut in two, counts one more.
    assert bytewise.largest == 5


@pytest.mark.parametrize("ending", [b"\n", b"\r", b"\r\n"])
def test_events_after_a_flood_of_comments_and_blank_lines_are_counted(ending: bytes) -> None:
    counter = SseValues()
    flood = (b": keep-alive" + ending + ending) * 10_000 + ending * 50_000
    for start in range(0, len(flood), 1 << 13):
        counter.feed(flood[start : start + (1 << 13)])
    counter.feed(b"data: [0,0]" + ending + ending)
    assert counter.largest == 3


def test_one_json_text_is_counted_by_the_workers_scanner() -> None:
    # One home for raw-byte JSON scanning: the frame protocol's depth check shares it.
    import worker

    assert JsonValues is worker.JsonValues
