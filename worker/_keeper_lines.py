"""The keeper's line protocol: one JSON object per line on the keeper's own socketpair.

keeper -> host, in this order::

    hello   {"keeper": pid, "child": pid}      once, right after the keeper forked the child
            {"error": str}                      instead of hello: the zygote could not fork
            {"step": str, "error": str, "errno": int}
                                                instead of hello: a step of the keeper's
                                                setup failed (e.g. "chown the scratch dir")
    ack     {"applied": bool, "error": str, "cpu_limit_s": int, "scratch_error": str}
                                                the answer to the limits request: the soft
                                                RLIMIT_CPU (hard is one second more; 0 if
                                                not applied); scratch_error "" when the
                                                scratch quota was set
    exit    {"exit": wait status, "cpu_ms": float, "maxrss_kib": int, "cpu_limit": bool,
             "cause": str}
                                                last, once the child is gone and reaped;
                                                cpu_limit: it died of its RLIMIT_CPU;
                                                cause: what ended it, when the keeper
                                                knows ("" otherwise): it killed the child
                                                (the scratch quota), or the child could not
                                                set itself up

host -> keeper::

    limits  {"cpu_seconds": number, "memory_mib": int, "scratch_mib": int, "data_mib": int}
                                                at most once, when the host takes the child

Each line is a frozen value object here; both ends write with ``to_line()`` (the keeper in
``_keeper``, the zygote's fork failure in ``_zygote``, the host's request in
``_keeper_channel``) and read with :class:`KeeperLineDecoder` / :func:`parse_limits_request`.
Anything malformed is a :class:`WorkerError`, never a ``KeyError`` or JSON error. Standard
library only: the zygote and the keeper import it.
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeAlias

from ._errors import WorkerError

MAX_LINE_BYTES = 64 * 1024
"""Longest line either side accepts (every real line is well under 200 bytes)."""

_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""Made once, in the zygote (``json.dumps`` with options makes one per call, a keeper's
first costing it page faults)."""
_INT = (int,)
_NUMBER = (int, float)
_BOOL = (bool,)
_STR = (str,)


@dataclass(frozen=True, kw_only=True)
class _Line:
    WIRE: ClassVar[tuple[tuple[str, str, tuple[type, ...]], ...]] = ()
    """(key on the wire, attribute, accepted JSON types) for every field, in wire order."""

    def to_line(self) -> bytes:
        body = {key: getattr(self, attr) for key, attr, _ in self.WIRE}
        return _ENCODER.encode(body).encode() + b"\n"

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
    """The keeper forked the child."""

    keeper_pid: int
    child_pid: int
    WIRE = (("keeper", "keeper_pid", _INT), ("child", "child_pid", _INT))


@dataclass(frozen=True, kw_only=True)
class SpawnFailed(_Line):
    """No keeper: the zygote's fork failed (written by the zygote on the keeper's socket)."""

    error: str
    WIRE = (("error", "error", _STR),)


@dataclass(frozen=True, kw_only=True)
class SetupFailed(_Line):
    """No child: a step of the keeper's setup failed (written by the keeper itself)."""

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
        return f"the keeper could not {self.step}: {self.error}"


_PASSING_ERRNOS = frozenset(
    {0, errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.EINTR, errno.ENOSPC}
)


@dataclass(frozen=True, kw_only=True)
class LimitsAck(_Line):
    """Whether the keeper lowered the child's CPU and address-space rlimits, and set the
    scratch tmpfs to the run's quota."""

    applied: bool
    error: str
    cpu_limit_s: float
    """The soft RLIMIT_CPU applied (seconds of CPU the child may have used in total)."""
    scratch_error: str = ""
    """Why the scratch quota was not set ("" when it was)."""
    WIRE = (
        ("applied", "applied", _BOOL),
        ("error", "error", _STR),
        ("cpu_limit_s", "cpu_limit_s", _NUMBER),
        ("scratch_error", "scratch_error", _STR),
    )


@dataclass(frozen=True, kw_only=True)
class ExitReport(_Line):
    """The child is gone: its wait status and rusage, and whether its CPU limit killed it."""

    status: int
    cpu_ms: float
    maxrss_kib: int
    cpu_limit: bool = False
    """The keeper's finding (not a rusage threshold): the kernel's RLIMIT_CPU clock had
    passed the soft limit the keeper set, and the child died of SIGXCPU, SIGKILL or its
    SIGXCPU handler's exit."""
    cause: str = ""
    """What ended the child, when the keeper knows: it killed it (``killed by the keeper:
    ...``) or the child could not set itself up (``could not set itself up: ...``); ""
    otherwise."""
    WIRE = (
        ("exit", "status", _INT),
        ("cpu_ms", "cpu_ms", _NUMBER),
        ("maxrss_kib", "maxrss_kib", _INT),
        ("cpu_limit", "cpu_limit", _BOOL),
        ("cause", "cause", _STR),
    )


@dataclass(frozen=True, kw_only=True)
class LimitsRequest(_Line):
    """The host's one request: the run's CPU seconds, memory and scratch quota, and the
    RLIMIT_DATA it chose (the memory itself without a memory cgroup; a backstop 1 GiB above
    it with one, so the cgroup's own OOM kill comes first, as before)."""

    cpu_seconds: float
    memory_mib: int
    scratch_mib: int
    data_mib: int
    WIRE = (
        ("cpu_seconds", "cpu_seconds", _NUMBER),
        ("memory_mib", "memory_mib", _INT),
        ("scratch_mib", "scratch_mib", _INT),
        ("data_mib", "data_mib", _INT),
    )


KeeperLine: TypeAlias = Hello | SpawnFailed | SetupFailed | LimitsAck | ExitReport
_FROM_KEEPER: dict[frozenset[str], type[KeeperLine]] = {
    frozenset(key for key, _, _ in cls.WIRE): cls
    for cls in (Hello, SpawnFailed, SetupFailed, LimitsAck, ExitReport)
}


def _object(line: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise WorkerError(f"keeper line is not JSON: {line[:100]!r}") from exc
    if type(obj) is not dict:
        raise WorkerError(f"keeper line is not a JSON object: {line[:100]!r}")
    return obj


def parse_keeper_line(line: bytes) -> KeeperLine:
    """One line the keeper (or the zygote on its behalf) wrote, without its newline."""
    obj = _object(line)
    cls = _FROM_KEEPER.get(frozenset(obj))
    if cls is None:
        raise WorkerError(f"keeper line with unknown fields {sorted(obj)[:10]}")
    return cls.from_wire(obj)


def parse_limits_request(line: bytes) -> LimitsRequest:
    """The host's limits request, as the keeper reads it."""
    obj = _object(line)
    if set(obj) != {key for key, _, _ in LimitsRequest.WIRE}:
        raise WorkerError(f"limits request with fields {sorted(obj)[:10]}")
    return LimitsRequest.from_wire(obj)


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
