"""Capture of a program's output: a head and a tail kept around a marker, a total cap.

Both backends feed every ``stdout`` chunk here. The model sees at most about
``output_bytes`` (half from the start, half from the end, joined by a marker line saying
how much was left out); a stream past ``stream_bytes`` means the run must be killed.
A program's ``log`` records are re-emitted on the host by :func:`emit_log`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ._types import CapturedOutput


class OutputCapture:
    """Accumulates output text; never holds more than ``output_bytes`` of it."""

    def __init__(self, *, output_bytes: int, stream_bytes: int) -> None:
        if output_bytes <= 0 or stream_bytes <= 0:
            raise ValueError("output_bytes and stream_bytes must be positive")
        self._head_cap = output_bytes // 2
        self._tail_cap = output_bytes - self._head_cap
        self._stream_bytes = stream_bytes
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    @property
    def total_bytes(self) -> int:
        """Bytes fed so far (UTF-8), kept or not."""
        return self._total

    def feed(self, text: str) -> bool:
        """Add ``text``; ``False`` once the total (UTF-8 bytes) exceeds ``stream_bytes``."""
        # surrogatepass: a lone surrogate printed by a program must not break capture.
        data = text.encode("utf-8", "surrogatepass")
        self._total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_cap
            if excess > 0:
                del self._tail[:excess]
        return self._total <= self._stream_bytes

    def output(self) -> CapturedOutput:
        """The model-visible text and the truncation facts, as of now."""
        kept = len(self._head) + len(self._tail)
        if kept == self._total:
            text = (bytes(self._head) + bytes(self._tail)).decode("utf-8", "replace")
            return CapturedOutput(text=text, total_bytes=self._total, truncated=False)
        head = _cut_head(bytes(self._head))
        tail = _cut_tail(bytes(self._tail))
        omitted = self._total - len(head) - len(tail)
        text = (
            head.decode("utf-8", "replace")
            + f"\n... [{omitted} bytes omitted] ...\n"
            + tail.decode("utf-8", "replace")
        )
        return CapturedOutput(text=text, total_bytes=self._total, truncated=True)


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _cut_head(data: bytes) -> bytes:
    """Drop an incomplete UTF-8 character at the end of ``data``."""
    i = len(data)
    back = 0
    while i > 0 and back < 4 and _is_continuation(data[i - 1]):
        i -= 1
        back += 1
    if i == 0:
        return data
    lead = data[i - 1]
    need = (
        2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
    )
    return data if back + 1 >= need else data[: i - 1]


def _cut_tail(data: bytes) -> bytes:
    """Drop continuation bytes at the start of ``data`` (the rest of a split character)."""
    i = 0
    while i < len(data) and i < 3 and _is_continuation(data[i]):
        i += 1
    return data[i:]


def emit_log(record: dict[str, Any]) -> None:
    """Re-emit a child's (checked) ``log`` record under ``ptc.worker.<its name>``."""
    name = f"ptc.worker.{record['name']}"
    # A logger the host configured gets the record; other names go to ``ptc.worker`` itself,
    # so a program cannot make the host create (and keep forever) one logger per name.
    logger = logging.Logger.manager.loggerDict.get(name)
    if not isinstance(logger, logging.Logger):
        logger = logging.getLogger("ptc.worker")
    created = record["created"]
    if not 0 <= created <= time.time() + 86_400:
        created = time.time()  # a forged timestamp must not break a handler's formatter
    logger.handle(logging.makeLogRecord({**record, "name": name, "created": created}))
