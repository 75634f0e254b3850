"""Shared helpers for the backend, containment and security tests (a real zygote)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import textwrap
from collections.abc import Callable, Sequence

import anyio

from worker import CallBatch, CallReply, CallRequest, Containment, Limits, RunOutcome, RunRequest
from worker._host._backend import SubprocessBackend

# The shape sdkgen generates: tools call the injected __transport__ in batches.
SDK = textwrap.dedent(
    """
    class ToolCallError(Exception):
        def __init__(self, tool, code, message):
            super().__init__(f"{tool}: {code}: {message}")
            self.tool, self.code, self.message = tool, code, message

    class _Tool:
        def __init__(self, name):
            self.name = name
        def __call__(self, **kwargs):
            return self.map([kwargs])[0]
        def map(self, items):
            replies = __transport__.call_batch([(self.name, dict(kw)) for kw in items])
            for ok, value in replies:
                if not ok:
                    raise ToolCallError(self.name, *value)
            return [value for _, value in replies]

    class tools:
        echo = _Tool("echo")
        fail = _Tool("fail")

    def parallel(*thunks):
        return [t() for t in thunks]
    """
)

PROCESSES_PER_PRIMED_CHILD = 1
"""A pooled child is one process: the zygote supervises it."""

SHORT = Limits(wall_seconds=3.0, cpu_seconds=2.0, memory_mib=256)
RELAXED = Containment(require=frozenset())


async def echo_calls(calls: Sequence[CallRequest]) -> list[CallReply]:
    """Echo handler: ``echo`` returns its arguments, ``fail`` fails."""
    return [
        CallReply.failure("TOOL_FAILED", "asked to fail")
        if c.tool == "fail"
        else CallReply.success(dict(c.arguments))
        for c in calls
    ]


class EchoStarter:
    """``echo_calls`` as a :class:`worker.CallStarter`: the run loop hands it each batch
    instead of starting a task to await it."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        return await echo_calls(calls)

    def start(self, batch: CallBatch) -> None:
        async def answer() -> None:
            await batch.reply(await echo_calls(batch.calls))

        task = asyncio.get_running_loop().create_task(answer())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


async def run(
    backend: SubprocessBackend, code: str, limits: Limits = SHORT, profile: str = "python"
) -> RunOutcome:
    request = RunRequest(code=code, sdk_module=SDK, limits=limits, profile=profile)  # type: ignore[arg-type]
    return await backend.run(request, on_calls=echo_calls)


def cgroup_bases(pid: int) -> list[str]:
    """Where a host process's per-run cgroups nest: its own cgroup in each hierarchy."""
    from worker._host._cgroups import _base_dir

    own: dict[str, str] = {}
    with open(f"/proc/{pid}/cgroup", encoding="ascii") as fh:
        for line in fh.read().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else ["unified"]:
                own[name] = path
    return [b for h in ("memory", "pids", "unified") if (b := _base_dir(h, own))]


def run_cgroups(bases: Sequence[str], host_pid: int) -> list[str]:
    """The per-run cgroup directories the host process ``host_pid`` made under ``bases``."""
    import glob

    return [p for base in bases for p in glob.glob(os.path.join(base, f"ptc-{host_pid}-*"))]


def scratch_dirs(root: str | None = None) -> set[str]:
    """Every host's scratch root in ``root`` (default: this process's temp dir), named
    ``ptc-<pid>-<start>-<random>``, and the children's scratch dirs in them
    (``<root>/run-<n>``; none where children mount a tmpfs). A test that counts them gives
    the host under test a temp dir of its own (``TMPDIR``, or ``tempfile.tempdir`` in this
    process): never a shared one, where other hosts' runs come and go."""
    import re
    import tempfile

    tmp = root or tempfile.gettempdir()
    found = set()
    for name in os.listdir(tmp):
        if re.match(r"^ptc-\d+-\d+-", name):
            found.add(name)
            with contextlib.suppress(OSError):
                inside = os.listdir(os.path.join(tmp, name))
                found.update(f"{name}/{n}" for n in inside if n != "scratch")
    return found


def zombies(under: int) -> list[int]:
    """Pids of zombie processes in the tree rooted at ``under`` (itself included)."""
    tree = {under, *descendants(under)}
    found = []
    for pid in tree:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            found.append(pid)
    return found


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (via /proc/<pid>/task/*/children)."""
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children", encoding="ascii") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except OSError:
                continue
            out.extend(kids)
            stack.extend(kids)
    return out


async def eventually(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Whether ``predicate`` holds within ``timeout_s``, polled: only for changes nothing
    signals to the test (another process reaping, removing, exiting); the bound is
    generous, a loaded machine only makes it take longer."""
    deadline = anyio.current_time() + timeout_s
    while not predicate():
        if anyio.current_time() > deadline:
            return False
        await anyio.sleep(0.01)
    return True


def _is_scratch_keeper(pid: int) -> bool:
    """The zygote's own scratch keeper, which lives as long as the zygote."""
    from worker._supervisor._gatekeeper import NAME

    try:
        with open(f"/proc/{pid}/comm", "rb") as fh:
            return fh.read().strip() == NAME
    except OSError:
        return False


def leftover_descendants(pid: int, timeout_s: float = 10.0) -> list[int]:
    """Descendants of ``pid`` still present after waiting up to ``timeout_s`` for exits
    to be reaped (the zygote reaps on SIGCHLD, asynchronously to the host)."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        found = [p for p in descendants(pid) if not _is_scratch_keeper(p)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


# A program prefix that finds the run channel (the only socket fd a child has) and defines
# ``forge(body)``: write one length-prefixed frame body on it, as a hostile program can.
FORGE = textwrap.dedent(
    """
    import os, socket, stat, struct
    def _channel():
        for fd in range(3, 64):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    return socket.socket(fileno=fd)
            except OSError:
                pass
        raise RuntimeError("no channel")
    _chan = _channel()
    def forge(body):
        _chan.sendall(struct.pack('>I', len(body)) + body)
    """
)


def cgroup_dirs(prefix: str | None = None) -> set[str]:
    """The per-run cgroup directories that exist now (every hierarchy): this process's, or
    those whose name starts with ``prefix`` (``"ptc-"``: any host's)."""
    found: set[str] = set()
    prefix = prefix or f"ptc-{os.getpid()}-"
    with open("/proc/self/cgroup", encoding="ascii") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["unified"]:
            base = os.path.join("/sys/fs/cgroup", name, path.lstrip("/"))
            if os.path.isdir(base):
                found.update(
                    os.path.join(base, n) for n in os.listdir(base) if n.startswith(prefix)
                )
    return found
