"""``SubprocessBackend``: one fresh contained child per run, forked from a zygote.

Per run: take a pooled child (or fork one), write its cgroup memory limit, have its keeper
lower the per-run rlimits, send ``start``, then validate every frame until ``done`` + EOF,
under the host's wall clock. Every exit path kills the tree (confirmed) and removes the
scratch dir and the cgroups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import SocketStream, UNIXSocketStream

from . import _enforcement, _landlock, _seccomp
from ._abc import CallHandler, StdoutListener, WorkerBackend
from ._cgroups import CgroupJanitor, RunCgroups
from ._errors import ProtocolError, WorkerError
from ._framing import FrameDecoder, encode
from ._messages import validate_child_frame
from ._output import OutputCapture
from ._types import (
    CallReply,
    CallRequest,
    Containment,
    Dimension,
    Enforcement,
    FailureKind,
    RunOutcome,
    RunRequest,
    RunStats,
)
from ._zygote import ZygoteClient

SPAWN_TIMEOUT_S = 10.0
KILL_CONFIRM_S = 2.0
KEEPER_REPORT_S = 0.02


@dataclasses.dataclass
class Child:
    """A contained child that sent ``ready``, plus the host's handles on it."""

    keeper_pid: int
    pid: int
    pidfd: int
    run: SocketStream
    keeper: SocketStream
    decoder: FrameDecoder
    cgroups: RunCgroups
    scratch: str
    enforcement: dict[Dimension, Enforcement]
    keeper_buf: bytes = b""
    frames: deque[dict[str, Any]] = dataclasses.field(default_factory=deque)
    exit: dict[str, Any] | None = None
    cpu_limit_s: float = 0.0
    ready: bool = False
    closed: bool = False

    async def keeper_message(self) -> dict[str, Any] | None:
        """The next JSON line from the keeper, or ``None`` at EOF."""
        while b"\n" not in self.keeper_buf:
            try:
                data = await self.keeper.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                return None
            self.keeper_buf += data
        line, self.keeper_buf = self.keeper_buf.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        if "exit" in msg:
            self.exit = msg
        return msg

    async def kill(self) -> None:
        """Kill the whole tree and confirm it is gone (keeper exit, cgroup empty)."""
        if self.closed:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        # The child is pid 1 of its namespace (or at least the tree's root): its death
        # takes the namespace with it; the keeper then reports rusage and sweeps orphans.
        # Give the keeper a moment to report before cgroup.kill takes it down too.
        with anyio.move_on_after(KEEPER_REPORT_S):
            while self.exit is None and await self.keeper_message() is not None:
                pass
            # After the keeper's report only the keeper itself is left, exiting; writing
            # cgroup.kill then costs more (10-20 ms here) than letting it finish.
            for _ in range(100):
                if self.exit is None or not self.cgroups.populated():
                    break
                await anyio.sleep(0.0005)
        if self.exit is None or self.cgroups.populated():
            self.cgroups.kill()
        with anyio.move_on_after(KILL_CONFIRM_S) as scope:
            while self.exit is None and await self.keeper_message() is not None:
                pass
            while True:
                if not self.cgroups.populated():
                    break
                await anyio.sleep(0.0005)
        if scope.cancelled_caught and self.keeper_pid > 0:  # belt and braces: the keeper
            with contextlib.suppress(OSError):
                os.kill(self.keeper_pid, signal.SIGKILL)

    async def close(self, janitor: CgroupJanitor | None = None) -> None:
        """Kill (if needed) and release everything: sockets, pidfd, scratch, cgroups.

        With ``janitor``, the cgroup directories are removed on its thread."""
        if self.closed:
            return
        with anyio.CancelScope(shield=True):
            await self.kill()
            self.closed = True
            for stream in (self.run, self.keeper):
                with contextlib.suppress(Exception):
                    await stream.aclose()
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            shutil.rmtree(self.scratch, ignore_errors=True)
            if janitor is None:
                self.cgroups.remove()
            else:
                janitor.discard(self.cgroups)


Kill = tuple[FailureKind, str]


class RunLoop:
    """The host side of one run: frames in, replies out, limits and order enforced."""

    def __init__(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None,
        abort: anyio.Event | None,
        deadline: float,
        started: float,
    ) -> None:
        self.request = request
        self.on_calls = on_calls
        self.on_stdout = on_stdout
        self.abort = abort
        self.deadline = deadline
        self.started = started
        self.capture = OutputCapture(
            output_bytes=request.limits.output_bytes, stream_bytes=request.limits.stream_bytes
        )
        self.enforcement: dict[Dimension, Enforcement] = {}
        self.calls = 0
        self.last_id = 0
        self.done: dict[str, Any] | None = None
        self.peak_memory_kib = 0
        self.handler_error: BaseException | None = None
        self._send_lock = anyio.Lock()
        self._scope: anyio.CancelScope | None = None
        self._aborted = False

    @staticmethod
    async def next_frame(child: Child) -> dict[str, Any] | None:
        """The next validated child frame; ``None`` at EOF; ``ProtocolError`` if malformed."""
        while not child.frames:
            try:
                data = await child.run.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
                child.decoder.eof()
                return None
            child.frames.extend(child.decoder.feed(data))
        return child.frames.popleft()

    def fail(
        self, kind: FailureKind, detail: str, enforcement: Mapping[Dimension, Enforcement]
    ) -> RunOutcome:
        return RunOutcome(
            ok=False,
            kind=kind,
            detail=detail,
            output=self.capture.output(),
            enforcement=dict(enforcement),
            stats=self._stats(None),
        )

    def _stats(self, child: Child | None) -> RunStats:
        exit_info = child.exit if child is not None else None
        cpu_ms = float(exit_info["cpu_ms"]) if exit_info else 0.0
        peak = self.peak_memory_kib or (int(exit_info["maxrss_kib"]) if exit_info else 0)
        return RunStats(
            wall_ms=(time.monotonic() - self.started) * 1000.0,
            cpu_ms=cpu_ms,
            calls=self.calls,
            peak_memory_kib=peak,
        )

    def finish(self, outcome: RunOutcome | None, child: Child) -> RunOutcome:
        if self.handler_error is not None:
            raise self.handler_error
        if outcome is None:
            done = self.done or {}
            if done.get("ok") is True:
                outcome = RunOutcome(ok=True, value=done.get("value"))
            else:
                kind = done.get("kind", "worker-exit")
                outcome = RunOutcome(ok=False, kind=kind, detail=done.get("detail", ""))
        return dataclasses.replace(
            outcome,
            output=self.capture.output(),
            enforcement=self.enforcement,
            stats=self._stats(child),
        )

    async def drive(self, child: Child) -> RunOutcome | None:
        """Send ``start`` and run to the end. ``None`` means: use the ``done`` frame."""
        limits = dataclasses.asdict(self.request.limits)
        start = {
            "type": "start",
            "code": self.request.code,
            "profile": self.request.profile,
            "sdk_module": self.request.sdk_module,
            "limits": limits,
        }
        kill: Kill | None = None
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope(deadline=_to_anyio(self.deadline)) as scope:
                self._scope = scope
                if self.abort is not None:
                    tg.start_soon(self._watch_abort, self.abort)
                try:
                    await child.run.send(encode(start))
                    kill = await self._frames(child, tg)
                except (anyio.BrokenResourceError, OSError):
                    kill = await self._death(child)
            tg.cancel_scope.cancel()
        if self.handler_error is not None:
            return None
        if self._aborted:
            kill = ("abort", "the run was aborted by the host")
        elif scope.cancelled_caught:
            wall = self.request.limits.wall_seconds
            kill = ("timeout", f"wall clock limit of {wall:g} s exceeded")
        if kill is None:
            return None
        return RunOutcome(ok=False, kind=kill[0], detail=kill[1])

    async def _watch_abort(self, abort: anyio.Event) -> None:
        await abort.wait()
        self._aborted = True
        if self._scope is not None:
            self._scope.cancel()

    async def _frames(self, child: Child, tg: anyio.abc.TaskGroup) -> Kill | None:
        limits = self.request.limits
        while True:
            try:
                frame = await self.next_frame(child)
            except ProtocolError as exc:
                return ("protocol", exc.detail)
            if frame is None:
                return None if self.done is not None else await self._death(child)
            kind = frame["type"]
            if self.done is not None:
                return ("protocol", f"{kind!r} frame after done")
            if kind == "ready":
                return ("protocol", "second ready frame")
            if kind == "call":
                for call in frame["calls"]:
                    if call["id"] <= self.last_id:
                        return ("protocol", f"call id {call['id']} does not increase")
                    self.last_id = call["id"]
                self.calls += len(frame["calls"])
                if self.calls > limits.max_calls:
                    return ("call-limit", f"more than {limits.max_calls} tool calls")
                tg.start_soon(self._dispatch, child, frame["calls"])
            elif kind == "stdout":
                within = self.capture.feed(frame["data"])
                if self.on_stdout is not None:
                    self.on_stdout(frame["data"])
                if not within:
                    return ("output-limit", f"output exceeded {limits.stream_bytes} bytes")
            elif kind == "log":
                _emit_log(frame["record"])
            elif kind == "done":
                self.done = frame
            else:
                return ("protocol", f"unexpected {kind!r} frame from the child")

    async def _dispatch(self, child: Child, batch: list[dict[str, Any]]) -> None:
        requests = [
            CallRequest(id=c["id"], tool=c["tool"], arguments=c["arguments"]) for c in batch
        ]
        try:
            replies: Sequence[CallReply] = await self.on_calls(requests)
            if len(replies) != len(requests):
                raise WorkerError(f"handler returned {len(replies)} replies for {len(requests)}")
        except Exception as exc:  # a host bug: kill the run, re-raise from run()
            self.handler_error = exc
            if self._scope is not None:
                self._scope.cancel()
            return
        data = b"".join(
            _result_frame(r.id, reply) for r, reply in zip(requests, replies, strict=True)
        )
        async with self._send_lock:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await child.run.send(data)

    async def _death(self, child: Child) -> Kill:
        """The child's channel closed without ``done``: find out why it died."""
        with anyio.move_on_after(1.0):
            while child.exit is None and await child.keeper_message() is not None:
                pass
        limits = self.request.limits
        if child.cgroups.oom_killed():
            return ("memory-limit", f"killed at the memory limit of {limits.memory_mib} MiB")
        if child.exit is None:
            return ("worker-exit", "the child exited without an exit status")
        status = int(child.exit["exit"])
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            cpu_s = float(child.exit["cpu_ms"]) / 1000.0
            # RLIMIT_CPU's SIGKILL: rusage ticks may read a little under the applied limit.
            at_limit = child.cpu_limit_s > 0 and cpu_s >= 0.9 * child.cpu_limit_s
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and at_limit):
                return ("cpu-limit", f"CPU time limit of {limits.cpu_seconds:g} s exceeded")
            return ("worker-exit", f"the child was killed by {signal.Signals(sig).name}")
        return ("worker-exit", f"the child exited with status {os.waitstatus_to_exitcode(status)}")


def _to_anyio(deadline_monotonic: float) -> float:
    return anyio.current_time() + (deadline_monotonic - time.monotonic())


def _result_frame(call_id: int, reply: CallReply) -> bytes:
    frame: dict[str, Any]
    if reply.ok:
        frame = {"type": "result", "id": call_id, "ok": True, "value": reply.value}
    else:
        frame = {
            "type": "result",
            "id": call_id,
            "ok": False,
            "code": reply.code,
            "message": reply.message,
        }
    try:
        return encode(frame)
    except (ProtocolError, ValueError, TypeError) as exc:
        return encode(
            {
                "type": "result",
                "id": call_id,
                "ok": False,
                "code": "INVALID_RESULT",
                "message": f"the tool result could not be sent to the worker: {exc}",
            }
        )


def _emit_log(record: dict[str, Any]) -> None:
    name = f"ptc.worker.{record['name']}"
    logging.getLogger(name).handle(logging.makeLogRecord({**record, "name": name}))


class SubprocessBackend(WorkerBackend):
    """Runs each program in a fresh child forked from a zygote, contained per ``containment``.

    ``start()`` warms up (zygote + pool); ``run`` starts it lazily. ``aclose()`` stops the
    zygote, kills the pool and reaps everything.
    """

    def __init__(self, containment: Containment | None = None) -> None:
        self.containment = containment or Containment()
        self._zygote = ZygoteClient()
        self._pool: list[Child] = []
        self._doomed: list[Child] = []
        self._janitor = CgroupJanitor()
        self._counter = 0
        self._closed = False
        self._probe: dict[Dimension, Enforcement] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def zygote_pid(self) -> int | None:
        return self._zygote.pid

    def _cfg(self, scratch: str, cgroups: RunCgroups) -> dict[str, Any]:
        c = self.containment
        groups = [
            [n, os.path.join(p, "cgroup.procs")]
            for n, p in (
                ("memory", cgroups.memory),
                ("pids", cgroups.pids),
                ("unified", cgroups.unified),
            )
            if p
        ]
        return {
            "scratch": scratch,
            "cgroups": groups,
            "namespaces": c.namespaces,
            "rlimits": c.rlimits,
            "landlock": c.landlock,
            "seccomp": c.seccomp,
            "drop_privileges": c.drop_privileges,
        }

    async def _request(self) -> Child:
        """Ask the zygote for one child without waiting for it (see :meth:`_handshake`)."""
        self._counter += 1
        scratch = tempfile.mkdtemp(prefix="ptc-run-")
        name = f"ptc-{os.getpid()}-{self._counter}"
        cgroups = RunCgroups.create(name) if self.containment.cgroups else RunCgroups()
        run_host, run_child = socket.socketpair()
        keep_host, keep_child = socket.socketpair()
        try:
            self._zygote.request(
                self._cfg(scratch, cgroups), [run_child.fileno(), keep_child.fileno()]
            )
        except BaseException:
            for s in (run_host, keep_host):
                s.close()
            shutil.rmtree(scratch, ignore_errors=True)
            cgroups.remove()
            raise
        finally:
            run_child.close()
            keep_child.close()
        run = await UNIXSocketStream.from_socket(run_host)
        keeper = await UNIXSocketStream.from_socket(keep_host)
        return Child(
            keeper_pid=0,
            pid=0,
            pidfd=-1,
            run=run,
            keeper=keeper,
            decoder=FrameDecoder(validate_child_frame),
            cgroups=cgroups,
            scratch=scratch,
            enforcement={},
        )

    async def _handshake(self, child: Child) -> Child:
        """Wait for the keeper's hello and the child's ``ready``. Raises ``WorkerError``."""
        if child.ready:
            return child
        try:
            with anyio.fail_after(SPAWN_TIMEOUT_S):
                hello = await child.keeper_message()
                if hello is None or "child" not in hello:
                    why = (hello or {}).get("error", "the keeper exited before forking")
                    raise WorkerError(f"zygote could not start a child: {why}")
                child.keeper_pid = int(hello["keeper"])
                child.pid = int(hello["child"])
                child.pidfd = os.pidfd_open(child.pid)
                frame = await RunLoop.next_frame(child)
            if frame is None or frame["type"] != "ready":
                raise WorkerError(f"child did not send ready (got {frame and frame['type']})")
            child.enforcement = _enforcement.from_json(frame["enforcement"])
            child.ready = True
        except (WorkerError, ProtocolError, OSError, TimeoutError) as exc:
            await child.close()
            if isinstance(exc, WorkerError):
                raise
            raise WorkerError(f"child failed to start: {exc!r}") from exc
        except BaseException:
            await child.close()
            raise
        return child

    async def spawn(self) -> Child:
        """Fork one contained child and wait for its ``ready``. Raises ``WorkerError``."""
        return await self._handshake(await self._request())

    async def start(self) -> None:
        """Start the zygote and fill the pool with children that have sent ``ready``."""
        if self._closed:
            raise WorkerError("backend is closed")
        await self._refill()
        for child in list(self._pool):
            try:
                await self._handshake(child)
            except WorkerError:
                self._pool.remove(child)
                raise

    async def _refill(self) -> None:
        """Top the pool up with requested children (their handshake completes on take)."""
        if not self._zygote.alive():
            pool, self._pool = self._pool, []
            self._doomed.extend(pool)  # forked by a dead zygote: closed at the next run
        while len(self._pool) < self.containment.pool_size and not self._closed:
            self._pool.append(await self._request())

    async def _take(self) -> Child:
        for child in self._doomed:
            await child.close()
        self._doomed.clear()
        if not self._zygote.alive():
            await self._refill()
        while self._pool:
            child = self._pool.pop(0)
            try:
                await self._handshake(child)
            except WorkerError:
                continue
            if child.exit is None and not child.closed:
                return child
            await child.close()
        return await self.spawn()

    async def run(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None = None,
        abort: anyio.Event | None = None,
    ) -> RunOutcome:
        started = time.monotonic()
        deadline = started + request.limits.wall_seconds
        if self._closed:
            raise WorkerError("backend is closed")
        loop = RunLoop(
            request,
            on_calls=on_calls,
            on_stdout=on_stdout,
            abort=abort,
            deadline=deadline,
            started=started,
        )
        try:
            child = await self._take()
        except WorkerError as exc:
            return loop.fail("worker-exit", str(exc), {})
        try:
            with contextlib.suppress(WorkerError):
                await self._refill()
            outcome = await self._run_child(loop, child)
        finally:
            loop.peak_memory_kib = child.cgroups.peak_memory_kib()
            await child.close(self._janitor)
        return loop.finish(outcome, child)

    async def _run_child(self, loop: RunLoop, child: Child) -> RunOutcome | None:
        enforcement = dict(child.enforcement)
        limits = loop.request.limits
        if self.containment.cgroups and child.cgroups.memory is not None:
            if not child.cgroups.set_memory_limit(limits.memory_mib * 1024 * 1024):
                enforcement["memory"] = Enforcement(
                    level="partial", mechanism="RLIMIT_AS", gap="could not write cgroup limit"
                )
        if self.containment.rlimits:
            await child.keeper.send(
                json.dumps(
                    {"cpu_seconds": limits.cpu_seconds, "memory_mib": limits.memory_mib}
                ).encode()
                + b"\n"
            )
            ack = await child.keeper_message()
            if ack is not None and ack.get("applied"):
                child.cpu_limit_s = float(ack["cpu_limit_s"])
            if ack is None or not ack.get("applied"):
                why = ack.get("error", "") if ack else "keeper exited"
                enforcement["cpu"] = Enforcement(
                    level="none", mechanism="none", gap=f"RLIMIT_CPU not applied: {why}"
                )
        loop.enforcement = enforcement
        missing = _enforcement.missing(self.containment, enforcement)
        if missing is not None:
            return loop.fail("sandbox-unavailable", missing, enforcement)
        return await loop.drive(child)

    def probe(self) -> Mapping[Dimension, Enforcement]:
        """Predicted enforcement, from host capabilities (no child is forked)."""
        if self._probe is None:
            c = self.containment
            cg = RunCgroups.create(f"ptc-probe-{os.getpid()}") if c.cgroups else RunCgroups()
            groups = tuple(n for n in ("memory", "pids", "unified") if getattr(cg, n))
            cg.remove()
            abi = _landlock.abi_version() if c.landlock else 0
            userns = os.path.exists("/proc/self/ns/user") and _userns_allowed()
            facts = _enforcement.Facts(
                namespaces=("user", "net", "ipc", "mount", "pid")
                if c.namespaces and userns
                else (),
                cgroups=groups,
                rlimits=c.rlimits,
                landlock_abi=abi,
                seccomp=c.seccomp and _seccomp.available(),
            )
            self._probe = _enforcement.from_json(_enforcement.report(facts))
        return dict(self._probe)

    async def aclose(self) -> None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            pool, self._pool = self._pool + self._doomed, []
            self._doomed = []
            for child in pool:
                if not child.ready:
                    with contextlib.suppress(WorkerError):
                        await self._handshake(child)
                await child.close()
            self._zygote.stop()
            await anyio.to_thread.run_sync(self._janitor.close)


def _userns_allowed() -> bool:
    try:
        with open("/proc/sys/user/max_user_namespaces", encoding="ascii") as fh:
            return int(fh.read()) > 0
    except (OSError, ValueError):
        return True
