"""How many JSON values a message holds, counted on its raw bytes as they arrive.

A reply within its byte limit can still hold millions of tiny values (``[0,0,...]``,
150,000 content blocks), and every stage after the wire pays per value with the GIL held:
the parse, the SDK's validation, ptc's conversion (DESIGN section 9, "Hostile peers").
So the values are counted before anything parses them, piece by piece as the transport
reads them (a piece costs at most a few milliseconds, and the event loop runs between
pieces). One JSON text is counted by ``worker.JsonValues`` (the raw-byte JSON scanning
the frame protocol's depth check shares; strings skipped whole, in linear time);
:class:`SseValues` finds the JSON texts in a ``text/event-stream`` body.

The count is never below the values a parser finds (a hypothesis property in
``tests/mcp/test_values.py``); it can be above it by the empty containers written with
space inside (``[ ]``), or split between two pieces.
"""

from __future__ import annotations

import re
from typing import Final

from worker import JsonValues

__all__ = ("JsonValues", "SseValues")


class SseValues:
    """The values of the JSON messages in a ``text/event-stream`` body fed in pieces.

    Only the ``data`` lines are counted, joined as the SSE parser joins them (``\\n``);
    comment, ``event``, ``id`` and ``retry`` lines are skipped (a quote in them cannot hide
    anything), and a blank line ends an event. Lines end at ``\\r\\n``, ``\\r`` or ``\\n``,
    as the parser's. :attr:`largest` is the most any one event held: the SDK parses (and
    the event loop waits for) one event at a time.
    """

    __slots__ = ("_after_cr", "_event", "_field", "_line", "largest")

    def __init__(self) -> None:
        self.largest = 0
        self._event: JsonValues | None = None  # the event being read, once it has data
        self._line = _START  # what the current line is, as far as it was read
        self._field = b""  # the line's first bytes while it may still be a data line
        self._after_cr = False  # the last piece ended in \r: a \n next ends no other line

    def feed(self, piece: bytes) -> None:
        """Count the values of the events that ``piece``, the body's next bytes, holds."""
        position = 0
        if self._after_cr and piece.startswith(b"\n"):
            position = 1
        self._after_cr = piece.endswith(b"\r")
        while position < len(piece):
            # One search per line, from where the last ended: linear in the piece.
            found = _LINE_END.search(piece, position)
            if found is None:
                self._take(piece[position:])
                return
            end = found.start()
            self._take(piece[position:end])
            self._line_ended()
            position = end + (2 if piece.startswith(b"\r\n", end) else 1)
            if self._event is None:
                # Between events, blank lines change nothing: skipped at once (a flood of
                # them costs no Python step per line).
                position = _LINE_ENDS.match(piece, position).end()  # type: ignore[union-attr]

    def _take(self, part: bytes) -> None:
        """The next bytes of the current line (no line end in them)."""
        if not part:
            return
        if self._line in (_START, _FIELD):
            field = self._field + part
            if len(field) < len(_DATA) and _DATA.startswith(field):
                self._line, self._field = _FIELD, field
                return
            self._field = b""
            if not field.startswith(_DATA):
                self._line = _OTHER
                return
            self._data_line()
            part = field[len(_DATA) :]
        if self._line == _VALUE and part:
            part = part.removeprefix(b" ")  # one space after the colon is not data
            self._line = _DATA_LINE
        if self._line == _DATA_LINE and part:
            self._count(part)

    def _data_line(self) -> None:
        self._line = _VALUE
        if self._event is None:
            self._event = JsonValues()
            self.largest = max(self.largest, self._event.values)
        else:
            self._count(b"\n")  # how the parser joins an event's data lines

    def _count(self, data: bytes) -> None:
        assert self._event is not None
        self._event.feed(data)
        self.largest = max(self.largest, self._event.values)

    def _line_ended(self) -> None:
        if self._line == _FIELD and self._field == b"data":  # "data" alone: empty data
            self._data_line()
        blank = self._line == _START
        self._line, self._field = _START, b""
        if blank:
            self._event = None


_DATA: Final = b"data:"
# What the line being read is.
_START: Final = 0  # nothing read yet
_FIELD: Final = 1  # its first bytes are a prefix of "data:"
_VALUE: Final = 2  # a data line, right after its colon
_DATA_LINE: Final = 3  # a data line, in its value
_OTHER: Final = 4  # any other line


_LINE_END: Final = re.compile(rb"[\r\n]")
_LINE_ENDS: Final = re.compile(rb"[\r\n]*")
