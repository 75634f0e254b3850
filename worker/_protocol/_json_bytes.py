"""JSON text read as raw bytes, before anything decodes it.

Two questions are asked of a hostile peer's bytes before a parser sees them: how deeply
they nest (:func:`nesting_problem`: the frame protocol refuses a frame a decoder would
recurse into) and how many values they hold (:class:`JsonValues`, fed piece by piece as a
transport reads them: ``ptc.mcp`` bounds a server's replies with it, DESIGN section 9).
Both read the text outside its strings one way (:class:`OutsideStrings`): escaped
backslashes and quotes are dropped first, then every string is one possessive regex match
(``""`` in its place, so ``["x"]`` does not look like ``[]``), so commas and brackets in
text never count, no input makes the scan quadratic, and a string left open runs to the
end of what was read. The rest is counted in C loops (``bytes.count``, ``translate``).

Text that is not JSON may pass; the parser rejects it afterwards. Standard library only:
the child imports it (through the frame protocol).
"""

from __future__ import annotations

import array
import itertools
import re
from typing import Final

__all__ = ("JsonValues", "OutsideStrings", "nesting_problem")

# A string, once escaped quotes are gone: to its closing quote, or to the end of the piece.
_STRING: Final = re.compile(rb'"[^"]*+(?:"|\Z)')
# An opening bracket becomes +1, a closing one -1 (as a signed byte); all else is dropped.
_STEPS: Final = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[{]}")


class OutsideStrings:
    """The bytes of a JSON text outside its strings, the text fed in pieces."""

    __slots__ = ("_escaped", "_in_string")

    def __init__(self) -> None:
        self._in_string = False
        self._escaped = False  # the last piece ended in a backslash that escapes the next byte

    def feed(self, piece: bytes) -> bytes:
        """``piece``, the text's next bytes, with each string (or the part of one in it)
        replaced by ``""`` and escapes dropped."""
        if not piece:
            return b""  # (an escape carried over still applies to the next byte)
        if self._escaped:
            piece, self._escaped = piece[1:], False
        if b"\\" in piece:
            # Escaped backslashes first, then escaped quotes: every quote left opens or
            # closes a string. (Outside strings a backslash is no JSON: the parser stops
            # there, and what follows need not be read right.)
            piece = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
            if piece.endswith(b"\\"):
                piece, self._escaped = piece[:-1], True
        if self._in_string:
            closing = piece.find(b'"')
            if closing < 0:
                return b""
            piece, self._in_string = piece[closing + 1 :], False
        if b'"' in piece:
            self._in_string = piece.count(b'"') % 2 == 1
            piece = _STRING.sub(b'""', piece)
        return piece


class JsonValues:
    """The values of one JSON text fed in pieces: :attr:`values`, an upper bound.

    A JSON text holds at most ``1 + commas + opening brackets`` values outside its
    strings, less one for each ``[]`` or ``{}`` written without space inside. The count is
    never below the values a parser finds; it can be above it by the empty containers
    written with space inside (``[ ]``), or split between two pieces."""

    __slots__ = ("_outside", "values")

    def __init__(self) -> None:
        self.values = 1  # the root
        self._outside = OutsideStrings()

    def feed(self, piece: bytes) -> None:
        """Count the values that start in ``piece``, the text's next bytes."""
        outside = self._outside.feed(piece)
        self.values += (
            outside.count(b",")
            + outside.count(b"[")
            + outside.count(b"{")
            - outside.count(b"[]")
            - outside.count(b"{}")
        )


def nesting_problem(text: bytes, limit: int) -> str | None:
    """``"nested deeper than <limit> levels"`` when the JSON text ``text`` is, else
    ``None``: the largest running sum of +1 per opening and -1 per closing bracket outside
    strings (about 0.2 s for 16 MiB of brackets here)."""
    if text.count(b"[") + text.count(b"{") <= limit:
        return None
    steps = OutsideStrings().feed(text).translate(_STEPS, _NOT_BRACKETS)
    if steps and max(itertools.accumulate(array.array("b", steps))) > limit:
        return f"nested deeper than {limit} levels"
    return None
