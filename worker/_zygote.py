"""The zygote: a preloaded, single-threaded process that forks one keeper + child per run.

Started by the host as ``<abs python> -I -m worker._zygote <control-fd>`` with an empty
environment in its own session. It preloads the child runtime and the allowed modules,
freezes the GC (forked children then share those pages), dies with the host
(PR_SET_PDEATHSIG) and reaps orphans as a subreaper. Control channel: a SOCK_SEQPACKET
socketpair; each request is one JSON message carrying two fds (the child's end of the run
socketpair and the keeper's end of its own socketpair), forwarded by fork, so run data never
passes through the zygote. There is no reply: the keeper introduces itself on its socket,
and a failed fork is written there as ``{"error": str}`` (so requests never block the host).
A message ``{"compile": true}`` carrying one fd (a memfd holding an SDK module's
UTF-8 text) has the zygote compile the module, so the children it forks afterwards share
the code objects instead of compiling it each.

The host removes a run's scratch dir and cgroups itself. A host that dies without saying
goodbye (``{"stop": true}``, sent when it stops the zygote) cannot: a lost Ray node, an
OOM kill. The zygote then outlives it briefly (the death signal it asks for is SIGTERM,
which it handles): its keepers end as their sockets close, and it removes what they
leave behind (:class:`_Leftovers`) before it exits.
"""

from __future__ import annotations

import array
import contextlib
import gc
import importlib
import json
import mmap
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from ._errors import WorkerError
from ._keeper_lines import SpawnFailed

ALLOWED_MODULES: tuple[str, ...] = tuple(
    (
        "json re math statistics datetime collections itertools functools random string "
        "decimal fractions heapq bisect textwrap typing time base64 unicodedata queue stat "
        "sys asyncio copy dataclasses"
    ).split()
)
"""What a restricted program may import (the same list as ``_child._stdlib``'s)."""
PRELOAD: tuple[str, ...] = (
    "worker._child",
    "worker._child._restricted",  # imported by the child only for the restricted profile
    "worker._child._policy",
    "worker._keeper",
    "RestrictedPython",
    "cloudpickle",  # a session's state (``_child._session``): no run pays its import
    "traceback",
    "linecache",
    "logging",
    "threading",
    "_strptime",
)
"""Imported by the zygote before it forks, so a child never reads them from disk."""
LEFTOVERS_WAIT_S = 5.0
"""How long a zygote whose host died waits for its keepers to end before it removes what
they left and exits (a keeper ends as soon as its host's socket closes)."""
MAX_MESSAGE = 1 << 20
MAX_SDK_MODULE_BYTES = 64 << 20
"""Largest SDK module the zygote compiles (a bigger one is compiled by each child)."""
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
"""The ``worker`` package's directory (found without importing the package itself)."""


def read_only_paths() -> list[str]:
    """What a child may read: the interpreter's install and every mapped shared object."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, _PACKAGE_DIR}
    for name in ("RestrictedPython",):
        mod = sys.modules.get(name)
        if mod is not None and mod.__file__:
            paths.add(os.path.dirname(mod.__file__))
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    paths.add(parts[5].strip().removesuffix(" (deleted)"))
    except OSError:
        pass
    paths.update(("/etc/ld.so.cache", "/dev/urandom"))
    return _outermost(p for p in paths if os.path.exists(p))


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those beneath a directory among them, sorted. A Landlock rule on a
    directory holds for everything beneath it, so they add nothing but work: each is a rule
    every child adds (50 paths here, 17 after). Compared as real paths, where Landlock sees
    them: a path that leads out of a directory through a symlink keeps its own rule."""
    real = {path: os.path.realpath(path) for path in paths}
    dirs = {r for r in real.values() if os.path.isdir(r)}
    kept = []
    for path, r in real.items():
        up = os.path.dirname(r)
        while up not in dirs and up != os.path.dirname(up):
            up = os.path.dirname(up)
        if up == r or up not in dirs:
            kept.append(path)
    return sorted(kept)


def _preload() -> None:
    for name in (*ALLOWED_MODULES, *PRELOAD):
        try:
            importlib.import_module(name)
        except ImportError:  # pragma: no cover - reported by the child at serve time
            pass


_Paths = tuple[str, list[list[str]]]
"""A keeper's scratch dir and its cgroups as its request named them ([name, procs file])."""


class _Leftovers:
    """The scratch dir and cgroup directories of each keeper this zygote forked: what a
    host that died could not remove. Kept while the keeper runs and for the last
    :data:`_ENDED` keepers that ended (their host may not have removed them yet)."""

    _ENDED = 1024

    def __init__(self) -> None:
        self.running: dict[int, _Paths] = {}
        self._ended: deque[_Paths] = deque(maxlen=self._ENDED)

    def forked(self, pid: int, cfg: dict[str, Any]) -> None:
        # The request's own objects, kept as they are: the zygote does as little as it
        # can between forks (each write after a fork copies a page).
        self.running[pid] = (cfg["scratch"], cfg.get("cgroups", []))

    def reap(self) -> None:
        """Reap every exited child (keepers, and orphans: the zygote is a subreaper)."""
        try:
            while pid := os.waitpid(-1, os.WNOHANG)[0]:
                paths = self.running.pop(pid, None)
                if paths is not None:
                    self._ended.append(paths)
        except ChildProcessError:
            pass

    def remove(self, wake_r: int) -> None:
        """The host is gone: wait (bounded) for the keepers to end, then remove what every
        keeper that ended left behind (the host removed most of it already)."""
        deadline = time.monotonic() + LEFTOVERS_WAIT_S
        self.reap()
        while self.running and (left := deadline - time.monotonic()) > 0:
            if select.select([wake_r], [], [], left)[0]:  # SIGCHLD
                os.read(wake_r, 4096)
            self.reap()
        for scratch, cgroups in self._ended:
            shutil.rmtree(scratch, ignore_errors=True)  # empty but for a run without a tmpfs
            for _, procs in cgroups:
                _remove_cgroup(os.path.dirname(procs), deadline=time.monotonic() + 1.0)
        self._ended.clear()


def _remove_cgroup(path: str, *, deadline: float) -> None:
    """``rmdir`` a cgroup, retrying while the kernel still accounts its last exits."""
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)


def _spawn(
    msg: dict[str, Any],
    fds: list[int],
    static: dict[str, Any],
    leftovers: _Leftovers,
    keeper_main: Callable[[dict[str, Any], int, int], NoReturn],
) -> None:
    if len(fds) != 2:
        return
    cfg = {**msg["cfg"], **static}
    try:
        pid = os.fork()
    except OSError as exc:
        # Reported on the keeper's own socket, where the host waits for the keeper.
        with contextlib.suppress(OSError):
            os.write(fds[1], SpawnFailed(error=f"fork failed: {exc}").to_line())
        return
    if pid == 0:
        for fd in static["close_in_child"]:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        keeper_main(cfg, fds[0], fds[1])
    leftovers.forked(pid, cfg)


def _inbox() -> mmap.mmap:
    """Where the requests are received: one buffer for the zygote's life. (A fresh buffer of
    :data:`MAX_MESSAGE` per request, as ``socket.recv_fds`` makes, grew the zygote's heap
    by about 1 KiB a run, for good: every fork after it copied more.) Its pages are backed
    only where a request was written; private, and not inherited by the keepers."""
    inbox = mmap.mmap(-1, MAX_MESSAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    inbox.madvise(mmap.MADV_DONTFORK)
    return inbox


def _receive(control: socket.socket, inbox: mmap.mmap) -> tuple[bytes, list[int]]:
    """One request and the fds it carries (at most 4), as ``socket.recv_fds`` gives them;
    ``b""`` when the host closed the channel."""
    fds = array.array("i")
    size, ancillary, _, _ = control.recvmsg_into([inbox], socket.CMSG_LEN(4 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return inbox[:size], list(fds)


def _read_module(fd: int) -> str | None:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 20):
        size += len(chunk)
        if size > MAX_SDK_MODULE_BYTES:
            return None
        chunks.append(chunk)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _compile(module: object) -> None:
    from ._child._runtime import precompile_sdk

    if isinstance(module, str) and precompile_sdk(module):
        gc.freeze()  # the new objects too: a child's collections never touch their pages


def main(control_fd: int) -> None:
    from . import _seccomp
    from ._keeper import keeper_main, uid_drop_obstacle
    from ._syscalls import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, prctl

    host_gone: list[bool] = []
    # The host's death is a SIGTERM (not a SIGKILL): the zygote then cleans up after it.
    signal.signal(signal.SIGTERM, lambda *_: host_gone.append(True))
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the host died before we set the death signal
        return
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    _preload()
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        _seccomp.prepare()  # built once; each child reports what it could not apply itself
    install_paths = [sys.base_prefix, sys.prefix, os.path.dirname(sys.executable)]
    static: dict[str, Any] = {
        "read_only": read_only_paths(),
        # Asked once here, not by every keeper (they have the zygote's capabilities).
        "uid_drop_obstacle": uid_drop_obstacle(install_paths) if os.geteuid() == 0 else "",
    }
    gc.freeze()
    control = socket.socket(fileno=control_fd)
    inbox = _inbox()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    static["close_in_child"] = [control_fd, wake_r, wake_w]
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    leftovers = _Leftovers()
    goodbye = False
    while not host_gone:
        watched: list[Any] = [control, wake_r]
        ready, _, _ = select.select(watched, [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            leftovers.reap()
        if control not in ready:
            continue
        data, fds = _receive(control, inbox)
        if not data:
            break
        try:
            msg = json.loads(data)
            if "stop" in msg:
                goodbye = True
                break
            if "compile" in msg:
                if len(fds) == 1:
                    _compile(_read_module(fds[0]))
            else:
                _spawn(msg, fds, static, leftovers, keeper_main)
        except (ValueError, KeyError, TypeError):
            pass  # a malformed request: closing its fds tells the host
        finally:
            for fd in fds:
                os.close(fd)
    if goodbye:  # the host closed its pool: nothing of ours is left
        leftovers.reap()
    else:  # the host died (or dropped its end): what it could not remove, we do
        leftovers.remove(wake_r)


class ZygoteClient:
    """The host's handle on one zygote process (start, spawn a keeper, stop)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the zygote (blocking for a few ms: fork+exec only, preloading is async)."""
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = os.path.dirname(_PACKAGE_DIR)
        try:
            self._proc = subprocess.Popen(
                [os.path.abspath(sys.executable), "-I", "-c", _BOOT, root, str(theirs.fileno())],
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise WorkerError(f"could not start the zygote ({sys.executable}): {exc}") from exc
        finally:
            theirs.close()
        ours.setblocking(False)
        self._control = ours

    def request(self, cfg: dict[str, Any], fds: list[int]) -> None:
        """Ask for one keeper (fire and forget: the keeper introduces itself on its own
        socket, and a failed fork is reported there). Raises ``WorkerError`` when the
        zygote cannot be reached (it is restarted on the next request)."""
        control = self._channel()
        msg = json.dumps({"cfg": cfg}).encode()
        try:
            socket.send_fds(control, [msg], fds)
        except OSError as exc:
            self.stop()
            raise WorkerError(f"zygote is not reachable: {exc!r}") from exc

    def compile(self, module: str) -> bool:
        """Have the zygote compile an SDK module for the children it forks from now on
        (fire and forget; the text travels in a memfd, whatever its size). ``False`` when
        it was not sent: too large, or the channel is full or broken (each child then
        compiles the module itself)."""
        data = module.encode("utf-8", "surrogatepass")
        if len(data) > MAX_SDK_MODULE_BYTES:
            return False
        control = self._channel()
        try:
            fd = os.memfd_create("ptc-sdk-module", os.MFD_CLOEXEC)
        except OSError:
            return False
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.lseek(fd, 0, os.SEEK_SET)
            socket.send_fds(control, [b'{"compile": true}'], [fd])
        except OSError:
            return False
        finally:
            os.close(fd)
        return True

    def _channel(self) -> socket.socket:
        """The control channel, the zygote (re)started first when it is not running."""
        if not self.alive():
            self.start()
        assert self._control is not None
        return self._control

    def stop(self) -> None:
        """Say goodbye and close the control channel (the zygote exits), then reap it
        (killed if it takes more than a second).

        Without the goodbye (a host that died) the zygote removes what its keepers left
        behind; a host that stops it has closed its children and removed that itself."""
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.send(b'{"stop": true}')
            self._control.close()
            self._control = None
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -I ignores PYTHONPATH and the cwd; the project root (for an uninstalled checkout) comes
# in argv, and the installed package wins if present.
_BOOT = (
    "import sys; r = sys.argv[1]; sys.path.append(r); "
    "from worker._zygote import main; main(int(sys.argv[2]))"
)

if __name__ == "__main__":
    main(int(sys.argv[1]))
