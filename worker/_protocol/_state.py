"""A session's state on the run channel: opaque bytes as raw ``state`` frames.

A state can be larger than one frame (``Limits.session_mib`` is 16 MiB by default, the
frame cap 16 MiB), so it crosses in chunks of at most :data:`STATE_CHUNK_BYTES`, each a
raw frame (``_framing``: the bytes as they are, no base64, no JSON), in order, in both
directions: the host sends a state after ``start`` (whose ``session.bytes`` says how long
it is), the child sends the state it saved before ``saved`` (whose ``bytes`` must match)
and ``done``.

The frame validator (``_messages``) checks each chunk alone (not empty, within
:data:`STATE_CHUNK_BYTES`); whoever receives a state adds the chunks up with
:class:`StateReceiver` (the total within what was announced or allowed); the host's run
loop takes the child's ``state`` and ``saved`` frames through :class:`SavedState`.
Nobody here looks inside the bytes: the host never parses them (only the contained
child deserializes a state, ``_child._session``). Standard library only: the child
imports it.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._errors import ProtocolError
from .._types import SessionSave
from ._framing import Frame, raw_frame, scrub_text

STATE_CHUNK_BYTES = 4 * 1024 * 1024
"""Most bytes of a state one ``state`` frame carries."""


def state_frames(blob: bytes) -> Iterator[bytes]:
    """``blob`` as encoded raw ``state`` frames, in order (none for an empty blob)."""
    view = memoryview(blob)
    for start in range(0, len(blob), STATE_CHUNK_BYTES):
        yield raw_frame(view[start : start + STATE_CHUNK_BYTES])


class StateReceiver:
    """The chunks of one state as they arrive (each checked alone by the frame
    validator), added up: ``limit`` is the most bytes the state may have (announced, or
    allowed); :meth:`feed` raises :class:`ProtocolError` for a chunk that takes the total
    past it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = 0
        self._chunks: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.received > self.limit:
            raise ProtocolError(
                f"the state passed {self.limit} bytes (it was announced or allowed no more)"
            )
        self._chunks.append(chunk)

    def blob(self) -> bytes:
        """The bytes received so far, joined."""
        return self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)


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
