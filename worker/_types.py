"""Value objects shared by the host side of ``worker`` and its callers.

Everything here is plain data: frozen, keyword-only dataclasses with units in their
names. ``ptc`` re-exports :class:`Limits` and :class:`Containment` as its own public names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast, get_args

JSON: TypeAlias = Any
"""A JSON value: ``None | bool | int | float | str | list[JSON] | dict[str, JSON]``."""

Profile: TypeAlias = Literal["python", "restricted"]
Dimension: TypeAlias = Literal["filesystem", "network", "processes", "memory", "cpu"]
Level: TypeAlias = Literal["full", "partial", "none"]

DIMENSIONS: tuple[Dimension, ...] = ("filesystem", "network", "processes", "memory", "cpu")

FailureKind: TypeAlias = Literal[
    "syntax",
    "preflight",
    "policy",
    "exception",
    "invalid-result",
    "timeout",
    "cpu-limit",
    "memory-limit",
    "output-limit",
    "call-limit",
    "worker-exit",
    "protocol",
    "sandbox-unavailable",
    "abort",
    "replay-diverged",
]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
SESSION_SAVED_KINDS: frozenset[FailureKind] = frozenset(("exception", "invalid-result"))
"""Failure kinds after which a run on a session saves its state: its program ran to its end
(it raised, or returned something that is not JSON), as a successful one did; a limit, a
policy violation or a kill ends a run in the middle, and nothing of it is saved."""

MIB = 1024 * 1024
GIB = 1024 * MIB

_SECONDS_MAX = 86_400.0
# (minimum, maximum) of every Limits field: a value outside cannot be applied (a child
# needs about 5 MiB before the program starts; RLIMIT_AS and the cgroup take bytes in 64
# bits; a done frame must fit the 16 MiB frame cap with its characters escaped) or is
# absurd enough to be a mistake. Each bound is named in the ValueError.
LIMIT_BOUNDS: Mapping[str, tuple[int | float, int | float]] = {
    "wall_seconds": (0.0, _SECONDS_MAX),
    "cpu_seconds": (0.0, _SECONDS_MAX),
    "memory_mib": (32, 1024 * 1024),
    "scratch_mib": (1, 1024 * 1024),
    "output_bytes": (1, GIB),
    "stream_bytes": (1, 64 * GIB),
    "result_bytes": (1, 8 * MIB),
    "max_calls": (1, 1_000_000),
    "max_parallel_calls": (1, 1000),
    "session_mib": (1, 4096),
}
"""Inclusive bounds of each :class:`Limits` field (the seconds: above 0, at most a day)."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Per-run limits. Every breach ends the run with its own failure kind.

    ``output_bytes`` bounds the model-visible output (head and tail kept around a marker);
    ``stream_bytes`` bounds everything the program may print or log before it is killed;
    ``scratch_mib`` bounds all files in the scratch dir together (they live in memory and
    count against ``memory_mib`` too); ``session_mib`` bounds the state a run on a session
    saves (its globals and its files, serialized together). ``max_parallel_calls`` is the
    host's: it caps how many of a run's nested calls run at once (its scheduler, in
    ``ptc``); the worker carries it (``start`` sends every field) and never reads it. Each
    value is checked
    against :data:`LIMIT_BOUNDS` here: one the host cannot apply is a ``ValueError`` now,
    never a failed run later.
    """

    wall_seconds: float = 30.0
    cpu_seconds: float = 30.0
    memory_mib: int = 512
    scratch_mib: int = 256
    output_bytes: int = 65536
    stream_bytes: int = 16 * MIB
    result_bytes: int = 1 * MIB
    max_calls: int = 1000
    max_parallel_calls: int = 10
    session_mib: int = 16

    def __post_init__(self) -> None:
        for name, (low, high) in LIMIT_BOUNDS.items():
            value = getattr(self, name)
            if name.endswith("_seconds"):
                if not isinstance(value, int | float) or isinstance(value, bool):
                    raise ValueError(f"Limits.{name} must be a number, got {value!r}")
                if not low < value <= high:  # NaN fails this too
                    raise ValueError(
                        f"Limits.{name} must be above 0 and at most {high:g} s, got {value!r}"
                    )
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"Limits.{name} must be an int, got {value!r}")
            if not low <= value <= high:
                raise ValueError(
                    f"Limits.{name} must be between {low} and {high}, got {value!r}"
                )
        if self.output_bytes > self.stream_bytes:
            raise ValueError("Limits.output_bytes cannot exceed Limits.stream_bytes")


MAX_POOL_SIZE = 64
"""Most children a backend keeps ready (each is two processes and a few MiB)."""


@dataclass(frozen=True, kw_only=True)
class Containment:
    """Which OS protections to apply to each child, and which dimensions a run requires.

    Each switch turns one mechanism off by configuration (useful on hosts where it breaks
    something); ``require`` lists the dimensions that must reach ``full`` or the run fails
    closed as ``sandbox-unavailable``. ``require=()`` accepts whatever the host provides.
    """

    require: frozenset[Dimension] = frozenset(DIMENSIONS)
    namespaces: bool = True
    cgroups: bool = True
    rlimits: bool = True
    landlock: bool = True
    seccomp: bool = True
    drop_privileges: bool = True
    pool_size: int = 2

    def __post_init__(self) -> None:
        if isinstance(cast(object, self.require), str):
            raise ValueError("Containment.require takes a collection of dimensions, not a str")
        req = frozenset(self.require)
        unknown = sorted(map(repr, set(req) - set(DIMENSIONS)))
        if unknown:
            raise ValueError(f"Containment.require: unknown dimensions {unknown}; use {DIMENSIONS}")
        object.__setattr__(self, "require", req)
        for name in ("namespaces", "cgroups", "rlimits", "landlock", "seccomp", "drop_privileges"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Containment.{name} must be a bool, got {getattr(self, name)!r}")
        size = self.pool_size
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_POOL_SIZE:
            raise ValueError(
                f"Containment.pool_size must be an int from 0 to {MAX_POOL_SIZE}, got {size!r}"
            )


@dataclass(frozen=True, kw_only=True)
class Enforcement:
    """How one dimension was protected in one run, as it actually applied.

    ``node`` names the machine that applied it when that is not the host (``worker.ray``);
    empty for local runs, and then left out of :meth:`as_json`.
    """

    level: Level
    mechanism: str
    gap: str = ""
    node: str = ""

    def as_json(self) -> dict[str, str]:
        """``{level, mechanism, gap}`` (and ``node`` when a cluster ran it), as ``meta``
        carries it."""
        data = {"level": self.level, "mechanism": self.mechanism, "gap": self.gap}
        if self.node:
            data["node"] = self.node
        return data


@dataclass(frozen=True, kw_only=True)
class RunStats:
    """What one run cost. ``node`` names the machine it ran on when that is not the host
    (``worker.ray``); empty for local runs, and then left out of :meth:`as_json`.

    ``peak_memory_kib`` is the child's peak as its memory cgroup counted it, else its peak
    resident set (``VmHWM``, or the keeper's ``ru_maxrss``); ``None`` when neither could be
    read (a run that never had a child, a child gone unreported), never a made-up 0."""

    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    calls: int = 0
    peak_memory_kib: int | None = None
    node: str = ""

    def as_json(self) -> dict[str, float | int | str | None]:
        """The stats as ``meta["stats"]`` carries them (``peak_memory_kib`` ``None`` when
        it could not be measured)."""
        data: dict[str, float | int | str | None] = {
            "wall_ms": self.wall_ms,
            "cpu_ms": self.cpu_ms,
            "calls": self.calls,
            "peak_memory_kib": self.peak_memory_kib,
        }
        if self.node:
            data["node"] = self.node
        return data


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """One program to run in a fresh worker.

    ``sdk_module`` is the worker-module source produced by ``sdkgen`` (it expects a
    transport, see ``sdkgen``); ``profile`` picks plain CPython or RestrictedPython.
    ``session`` is a session's state to run on (opaque bytes a worker saved before; empty:
    a fresh session): the worker restores it before the program and saves the program's
    state after (:attr:`RunOutcome.session`); ``None``: no session.
    """

    code: str
    sdk_module: str
    profile: Profile = "python"
    limits: Limits = field(default_factory=Limits)
    session: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class SessionSave:
    """The state a run on a session saved, as the worker reported it (opaque to the host).

    ``blob`` is ``None`` when nothing was saved (``problem`` says why, e.g. over
    ``Limits.session_mib``); ``names`` are the carried globals; ``dropped`` the globals (and
    files, as ``"file <path>"``) left out, each with the reason the model reads."""

    blob: bytes | None
    names: tuple[str, ...] = ()
    dropped: tuple[tuple[str, str], ...] = ()
    problem: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRequest:
    """One tool call made by a program. ``id`` is unique within the run, from 1."""

    id: int
    tool: str
    arguments: dict[str, JSON]


@dataclass(frozen=True, kw_only=True, slots=True)
class CallReply:
    """The host's answer to one :class:`CallRequest`: a value, or an error code and message."""

    ok: bool
    value: JSON = None
    code: str = ""
    message: str = ""

    @classmethod
    def success(cls, value: JSON) -> CallReply:
        """The call's value."""
        return cls(ok=True, value=value)

    @classmethod
    def failure(cls, code: str, message: str) -> CallReply:
        """The call failed: an error code (``DENIED``, ``TOOL_ERROR``, ...) and its message."""
        return cls(ok=False, code=code, message=message)


@dataclass(frozen=True, kw_only=True)
class CapturedOutput:
    """What a program printed: the model-visible text and the truncation facts."""

    text: str = ""
    total_bytes: int = 0
    truncated: bool = False


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """The final, tagged outcome of a run. A failure is data, never an exception.

    ``kind`` is ``None`` on success; otherwise one of :data:`FAILURE_KINDS` and ``detail``
    says what happened (for ``exception``, the traceback of the program's own frames).
    ``output`` holds what the program printed up to the end or the kill. ``session`` is
    the state a run on a session saved (a run that reached its end, see
    :class:`SessionSave`); ``None`` when it saved none (no session, or killed first).
    """

    ok: bool
    value: JSON = None
    kind: FailureKind | None = None
    detail: str = ""
    output: CapturedOutput = field(default_factory=CapturedOutput)
    enforcement: Mapping[Dimension, Enforcement] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    session: SessionSave | None = None

    def enforcement_json(self) -> dict[str, dict[str, str]]:
        """The enforcement report as ``meta["enforcement"]`` carries it."""
        return {dim: e.as_json() for dim, e in self.enforcement.items()}
