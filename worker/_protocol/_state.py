"""A session's state on the run channel: opaque bytes as ``state`` frames of base64 text.

A state can be larger than one frame (``Limits.session_mib`` is 16 MiB by default, the
frame cap 16 MiB with the JSON around it), so it crosses in chunks of at most
:data:`STATE_CHUNK_BYTES` (base64: :data:`STATE_CHUNK_CHARS` characters, well under the
frame cap), in order, in both directions: the host sends a state after ``start`` (whose
``session.bytes`` says how long it is), the child sends the state it saved before
``saved`` (whose ``bytes`` must match) and ``done``.

Whoever receives a state checks it with :class:`StateReceiver` as the chunks come: each
chunk strict base64 within its size, the total within what was announced or allowed; the
host's run loop takes the child's ``state`` and ``saved`` frames through
:class:`SavedState`.
Nobody here looks inside the bytes: the host never parses them (only the contained
child deserializes a state, ``_child._session``). Standard library only: the child
imports it.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterator

from .._errors import ProtocolError
from .._types import SessionSave
from ._framing import Frame, prefixed, scrub_text

STATE_CHUNK_BYTES = 4 * 1024 * 1024
"""Most bytes of a state one ``state`` frame carries."""
STATE_CHUNK_CHARS = 4 * ((STATE_CHUNK_BYTES + 2) // 3)
"""Most base64 characters of one ``state`` frame's ``data``."""
_STATE_HEAD = b'{"type":"state","data":"'
_STATE_TAIL = b'"}'


def state_frames(blob: bytes) -> Iterator[bytes]:
    """``blob`` as encoded ``state`` frames, in order (none for an empty blob).

    Written by hand, not by the JSON encoder (about 13 ms a MiB here, against 0.2): base64
    text needs no escaping in a JSON string, so the frame is the same bytes."""
    view = memoryview(blob)
    for start in range(0, len(blob), STATE_CHUNK_BYTES):
        data = binascii.b2a_base64(view[start : start + STATE_CHUNK_BYTES], newline=False)
        yield prefixed(b"".join((_STATE_HEAD, data, _STATE_TAIL)))


class StateReceiver:
    """The chunks of one state as they arrive, checked in order and size.

    ``limit`` is the most bytes the state may have (announced, or allowed); :meth:`feed`
    raises :class:`ProtocolError` for a chunk that is not strict base64, is larger than
    :data:`STATE_CHUNK_BYTES`, or takes the total past ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = 0
        self._chunks: list[bytes] = []

    def feed(self, data: str) -> None:
        if len(data) > STATE_CHUNK_CHARS:
            raise ProtocolError(f"a state chunk of {len(data)} characters, over the chunk cap")
        try:
            chunk = binascii.a2b_base64(data, strict_mode=True)
        except (binascii.Error, ValueError) as exc:
            raise ProtocolError(f"a state chunk is not base64: {exc}") from None
        if not chunk:
            raise ProtocolError("an empty state chunk")
        self.received += len(chunk)
        if self.received > self.limit:
            raise ProtocolError(
                f"the state passed {self.limit} bytes (it was announced or allowed no more)"
            )
        self._chunks.append(chunk)

    def blob(self) -> bytes:
        """The bytes received so far, joined."""
        return b"".join(self._chunks)


class SavedState:
    """The host's side of the state a child saves: its ``state`` chunks within ``limit``
    bytes, then one ``saved`` whose ``bytes`` is what was sent (none with a ``problem``)."""

    def __init__(self, limit: int) -> None:
        self._receiver = StateReceiver(limit)
        self.saved: SessionSave | None = None

    def take(self, frame: Frame) -> str | None:
        """Take a ``state`` or ``saved`` frame (schema-checked); why it breaks the
        protocol, or ``None``."""
        if self.saved is not None:
            return "after saved"
        received = self._receiver.received
        if frame["type"] == "state":
            try:
                self._receiver.feed(frame["data"])
            except ProtocolError as exc:
                return exc.detail
            return None
        size, problem = frame["bytes"], scrub_text(frame["problem"])
        if size != received or (problem and size):
            return f"{size} bytes said, {received} sent"
        self.saved = SessionSave(
            blob=None if problem else self._receiver.blob(),
            names=tuple(scrub_text(name) for name in frame["names"]),
            dropped=tuple(
                (scrub_text(item["name"]), scrub_text(item["reason"])) for item in frame["dropped"]
            ),
            problem=problem,
        )
        return None
