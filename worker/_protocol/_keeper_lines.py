"""The supervisor's line protocol: one JSON object per line on a child's own socketpair.

The host holds one end; the zygote (the child's parent and supervisor) holds the other, and
the child itself holds a copy while it sets itself up (and closes it before the program
runs). Lines, to the host, in this order::

    hello   {"keeper": pid, "child": pid}      once, right after the zygote forked the child
            {"error": str}                      instead of hello: the zygote could not fork
            {"step": str, "error": str, "errno": int}
                                                after hello: a step of the child's own
                                                setup failed (e.g. "mount the scratch
                                                tmpfs"); the child exits
            {"killed": str}                     the scratch keeper killed the child, and why
                                                (its quota's entry cap, a file it could not
                                                see)
    exit    {"exit": wait status, "cpu_ms": float, "maxrss_kib": int, "cpu_clock_s": float}
                                                last, once the child is gone and reaped by
                                                the zygote: its status, rusage, and the CPU
                                                clock the kernel checks RLIMIT_CPU against,
                                                read from the zombie before it was reaped

The host writes nothing (a closed end tells the zygote nothing: it reaps the child when it
dies). Each line is a frozen value object here; the writers use ``to_line()`` (the zygote in
``_supervise``, the child in ``_isolate``/``_confine``, the scratch keeper in
``_gatekeeper``) and the host reads with :class:`KeeperLineDecoder`. The JSON is the
frames' (``_framing``'s one encoder and decoder: NaN, Infinity and a key given twice are
refused both ways). Anything malformed is a :class:`WorkerError`, never a ``KeyError`` or
JSON error. Standard library only: the zygote and its children import it.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeAlias

from .._errors import ProtocolError, WorkerError
from ._framing import WIRE_DECODER, WIRE_ENCODER

MAX_LINE_BYTES = 64 * 1024
"""Longest line either side accepts (every real line is well under 200 bytes)."""

_INT = (int,)
_NUMBER = (int, float)
_STR = (str,)


@dataclass(frozen=True, kw_only=True)
class _Line:
    WIRE: ClassVar[tuple[tuple[str, str, tuple[type, ...]], ...]] = ()
    """(key on the wire, attribute, accepted JSON types) for every field, in wire order."""

    def to_line(self) -> bytes:
        body = {key: getattr(self, attr) for key, attr, _ in self.WIRE}
        return WIRE_ENCODER.encode(body).encode("ascii") + b"\n"

    @classmethod
    def from_wire(cls, obj: dict[str, Any]) -> Self:
        """The line from a JSON object that has exactly the :attr:`WIRE` keys."""
        values = {}
        for key, attr, types in cls.WIRE:
            if type(obj[key]) not in types:
                raise WorkerError(f"keeper line {cls.__name__}: {key!r} has the wrong type")
            values[attr] = obj[key]
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class Hello(_Line):
    """The zygote forked the child (``keeper_pid``: the zygote, the child's supervisor)."""

    keeper_pid: int
    child_pid: int
    WIRE = (("keeper", "keeper_pid", _INT), ("child", "child_pid", _INT))


@dataclass(frozen=True, kw_only=True)
class SpawnFailed(_Line):
    """No child: the zygote's fork failed (written by the zygote on the child's socket)."""

    error: str
    WIRE = (("error", "error", _STR),)


@dataclass(frozen=True, kw_only=True)
class SetupFailed(_Line):
    """A step of the child's own setup failed (written by the child before it exits)."""

    step: str
    error: str
    errno: int
    """The step's errno (0 when it failed otherwise)."""
    WIRE = (("step", "step", _STR), ("error", "error", _STR), ("errno", "errno", _INT))

    @property
    def lasting(self) -> bool:
        """Whether the cause stays on this host (a refused permission, a missing kernel
        feature) rather than passing (memory, process or file-descriptor exhaustion): the
        host then stops asking for children instead of retrying."""
        return self.errno not in _PASSING_ERRNOS

    def describe(self) -> str:
        return f"the child could not {self.step}: {self.error}"


_PASSING_ERRNOS = frozenset(
    {0, errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.EINTR, errno.ENOSPC}
)


@dataclass(frozen=True, kw_only=True)
class Killed(_Line):
    """The scratch keeper killed the child (written just before the kill), and why."""

    reason: str
    WIRE = (("killed", "reason", _STR),)


@dataclass(frozen=True, kw_only=True)
class ExitReport(_Line):
    """The child is gone: its wait status, rusage, and the CPU clock RLIMIT_CPU is checked
    against (the host decides from it whether the CPU limit ended the child)."""

    status: int
    cpu_ms: float
    maxrss_kib: int
    cpu_clock_s: float = 0.0
    WIRE = (
        ("exit", "status", _INT),
        ("cpu_ms", "cpu_ms", _NUMBER),
        ("maxrss_kib", "maxrss_kib", _INT),
        ("cpu_clock_s", "cpu_clock_s", _NUMBER),
    )


KeeperLine: TypeAlias = Hello | SpawnFailed | SetupFailed | Killed | ExitReport
_FROM_KEEPER: dict[frozenset[str], type[KeeperLine]] = {
    frozenset(key for key, _, _ in cls.WIRE): cls
    for cls in (Hello, SpawnFailed, SetupFailed, Killed, ExitReport)
}


def _object(line: bytes) -> dict[str, Any]:
    try:
        obj = WIRE_DECODER.decode(line.decode("utf-8"))
    except (ValueError, RecursionError, ProtocolError) as exc:  # NaN or a key twice: ProtocolError
        raise WorkerError(f"keeper line is not JSON: {line[:100]!r}") from exc
    if type(obj) is not dict:
        raise WorkerError(f"keeper line is not a JSON object: {line[:100]!r}")
    return obj


def parse_keeper_line(line: bytes) -> KeeperLine:
    """One line the zygote, the child or the scratch keeper wrote, without its newline."""
    obj = _object(line)
    cls = _FROM_KEEPER.get(frozenset(obj))
    if cls is None:
        raise WorkerError(f"keeper line with unknown fields {sorted(obj)[:10]}")
    return cls.from_wire(obj)


class KeeperLineDecoder:
    """Incremental reader of keeper lines: feed bytes, get back the complete lines parsed.

    After a :class:`WorkerError` it stays broken (there is no resyncing a broken peer).
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._failed: WorkerError | None = None

    @property
    def failed(self) -> WorkerError | None:
        """The error that broke the stream, if one did (it is raised again on every feed)."""
        return self._failed

    def feed(self, data: bytes) -> list[KeeperLine]:
        if self._failed is not None:
            raise self._failed
        self._buffer += data
        lines: list[KeeperLine] = []
        try:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                lines.append(parse_keeper_line(line))
            if len(self._buffer) > MAX_LINE_BYTES:
                raise WorkerError(f"keeper line longer than {MAX_LINE_BYTES} bytes")
        except WorkerError as exc:
            self._failed = exc
            raise
        return lines
