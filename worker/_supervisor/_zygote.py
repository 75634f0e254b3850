"""The zygote: a preloaded, single-threaded process that forks one contained child per run
and supervises it.

Started by the host as ``<abs python> -I -c <boot> <root> <control-fd> <config>`` with an
empty environment in its own session (``_zygote_client``). It preloads the child runtime
and the allowed modules, sets up once what every child shares (``_domain``: network and IPC
namespaces, the scratch mount point, the Landlock ruleset, the seccomp filters), freezes the
GC (forked children then share those pages), dies with the host (``PR_SET_PDEATHSIG``) and,
a subreaper, reaps every child and reports its end (``_supervise``). Where no tmpfs can hold
a run's scratch quota it starts the scratch keeper (``_gatekeeper``) once.

Control channel: a ``SOCK_SEQPACKET`` socketpair; each request is one JSON message carrying
two fds, the child's end of its run channel and of its supervisor line. Run data never
passes through the zygote: it forks (into a pid namespace of the child's own, where the
kernel allows), closes the run channel's end and keeps the line until it reaps the child
(the child says ``hello`` on it, with its pid as the host sees it). A failed fork is
written there as ``{"error": str}``. A
message ``{"compile": true}`` carrying one fd (a memfd holding an SDK module's UTF-8 text)
has the zygote compile the module, so the children it forks afterwards share the code
objects instead of compiling it each.

The host removes a run's scratch dir and cgroups itself. A host that dies without saying
goodbye (``{"stop": true}``, sent when it stops the zygote) cannot: the zygote's death
signal is SIGTERM, which it handles by killing its children, and removing what they and
the requests still queued on its control socket leave behind, before it exits.
"""

from __future__ import annotations

import array
import contextlib
import gc
import importlib
import json
import mmap
import os
import random
import select
import signal
import socket
import sys
from collections.abc import Iterable
from typing import Any, cast

from .._protocol._keeper_lines import SpawnFailed
from .._protocol._spawn_config import ChildConfig, ChildRequest, Shared, ZygoteConfig

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
    "worker._supervisor._confine",
    "worker._supervisor._gatekeeper",
    "RestrictedPython",
    "cloudpickle",  # a session's state (``_child._session``): no run pays its import
    "traceback",
    "linecache",
    "logging",
    "threading",
    "_strptime",
    "hashlib",  # programs hash data: importing it (OpenSSL's libcrypto) costs a child 2.6-3.4 ms
)
"""Imported by the zygote before it forks, so a child never reads them from disk."""
MAX_MESSAGE = 1 << 20
MAX_SDK_MODULE_BYTES = 64 << 20
"""Largest SDK module the zygote compiles (a bigger one is compiled by each child)."""
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The ``worker`` package's directory (found without importing the package itself): this
module's folder's parent."""


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
    (50 paths here, 17 after). Compared as real paths, where Landlock sees them: a path that
    leads out of a directory through a symlink keeps its own rule."""
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


def _inbox() -> mmap.mmap:
    """Where the requests are received: one buffer for the zygote's life. (A fresh buffer of
    :data:`MAX_MESSAGE` per request, as ``socket.recv_fds`` makes, grew the zygote's heap
    by about 1 KiB a run, for good: every fork after it copied more.) Its pages are backed
    only where a request was written; private, and not inherited by the children."""
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
    from .._child._runtime import precompile_sdk

    if isinstance(module, str) and precompile_sdk(module):
        gc.freeze()  # the new objects too: a child's collections never touch their pages


class _Zygote:
    """The zygote's state between requests: what every child is forked with."""

    def __init__(self, config: ZygoteConfig, control_fd: int) -> None:
        from .._kernel import _seccomp
        from . import _domain
        from ._isolate import uid_drop_obstacle
        from ._supervise import Children

        with contextlib.suppress(OSError, RuntimeError, ValueError):
            _seccomp.prepare()  # built once; each child reports what it could not apply
        install_paths = [sys.base_prefix, sys.prefix, os.path.dirname(sys.executable)]
        # Asked once here (its children have its capabilities and its files).
        obstacle = uid_drop_obstacle(install_paths) if os.geteuid() == 0 else ""
        started_as = os.geteuid()
        self.config = config
        self.domain = _domain.enter(config, read_only_paths())
        self.children = Children()
        self.static = Shared(
            **config,
            **self.domain.facts(),
            uid_drop_obstacle=obstacle,
            zygote_uid_dropped=started_as == 0 and os.geteuid() != 0,
        )
        self.control = socket.socket(fileno=control_fd)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.registrations = -1  # the scratch keeper's, inherited by every child
        self._drop_to = _domain.NOBODY if config["drop_privileges"] and not obstacle else None
        if not self.domain.tmpfs and config["rlimits"]:
            self.start_gatekeeper()

    def start_gatekeeper(self) -> None:
        """Fork the scratch keeper (again, when the last one died)."""
        from ._gatekeeper import gatekeeper_main, registration_socketpair

        if self.registrations >= 0:
            os.close(self.registrations)
        ours, theirs = registration_socketpair()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            ours.close()
            for fd in (self.control.fileno(), self.wake_r, self.wake_w):
                os.close(fd)
            signal.set_wakeup_fd(-1)
            gatekeeper_main(theirs, self._drop_to if os.geteuid() == 0 else None, me)
        theirs.close()
        self.registrations = ours.detach()
        self.children.others.add(pid)

    def spawn(self, request: ChildRequest, fds: list[int]) -> None:
        """Fork one child for a request; ``fds`` (its run channel's end and its line's) are
        the zygote's to close."""
        from .._kernel._syscalls import fork_bare
        from ._confine import child_main
        from ._domain import next_pid_namespace

        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return
        run_fd, line_fd = fds
        cfg = ChildConfig(**request, **self.static, pidns=False)
        if self.domain.pidns:
            try:
                next_pid_namespace(self.domain.pidns_fd)
                cfg["pidns"] = True
            except OSError as exc:
                self.domain.pidns = False
                self.static["namespace_error"] = f"no pid namespace ({exc})"
        parent = 0 if cfg["pidns"] else os.getpid()
        try:
            pid = fork_bare()
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.write(line_fd, SpawnFailed(error=f"fork failed: {exc}").to_line())
            os.close(run_fd)
            os.close(line_fd)
            return
        if pid == 0:
            random.seed()  # os.fork's hook, which fork_bare skips
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            child_main(cfg, run_fd, line_fd, self.registrations, parent)
        os.close(run_fd)
        self.children.forked(pid, line_fd, cfg)  # the child says hello itself

    def pending(self, inbox: mmap.mmap) -> list[ChildRequest]:
        """The host is gone: the requests still queued on the control socket (their scratch
        dirs and cgroups are to be removed too), their fds closed."""
        found: list[ChildRequest] = []
        self.control.setblocking(False)
        while True:
            try:
                data, fds = _receive(self.control, inbox)
            except (BlockingIOError, OSError):
                break
            for fd in fds:
                os.close(fd)
            if not data:
                break
            with contextlib.suppress(ValueError, TypeError, KeyError):
                cfg = json.loads(data)["cfg"]
                if isinstance(cfg, dict) and "scratch" in cfg and "cgroups" in cfg:
                    found.append(cast(ChildRequest, cfg))  # made by this host
        return found


def main(control_fd: int, config: ZygoteConfig) -> None:
    from .._kernel._syscalls import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, prctl

    host_gone: list[bool] = []
    # The host's death is a SIGTERM (not a SIGKILL): the zygote then cleans up after it.
    signal.signal(signal.SIGTERM, lambda *_: host_gone.append(True))
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the host died before we set the death signal
        return
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    _preload()
    zygote = _Zygote(config, control_fd)
    gc.freeze()
    inbox = _inbox()
    signal.set_wakeup_fd(zygote.wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    goodbye = False
    while not host_gone:
        watched: list[Any] = [zygote.control, zygote.wake_r]
        ready, _, _ = select.select(watched, [], [])
        if zygote.wake_r in ready:
            os.read(zygote.wake_r, 4096)
            zygote.children.reap()
            if zygote.children.other_ended:  # the scratch keeper died: another one
                zygote.children.other_ended = False
                zygote.start_gatekeeper()
        if zygote.control not in ready:
            continue
        data, fds = _receive(zygote.control, inbox)
        if not data:
            break
        owned = False
        try:
            msg = json.loads(data)
            if "stop" in msg:
                goodbye = True
                break
            if "compile" in msg:
                if len(fds) == 1:
                    _compile(_read_module(fds[0]))
            elif isinstance(msg.get("cfg"), dict):
                owned = True
                zygote.spawn(msg["cfg"], fds)
        except (ValueError, KeyError, TypeError):
            pass  # a malformed request: closing its fds tells the host
        finally:
            if not owned:
                for fd in fds:
                    os.close(fd)
    if goodbye:  # the host closed its pool: nothing of ours is left but the scratch keeper
        zygote.children.stop(zygote.wake_r)
    else:  # the host died (or dropped its end): what it could not remove, we do
        from ._domain import release_root

        pending = zygote.pending(inbox)
        release_root(config["root"])
        zygote.children.leftovers(pending, config["root"], zygote.wake_r)


# -I ignores PYTHONPATH and the cwd; the project root (for an uninstalled checkout) comes
# in argv, and the installed package wins if present.
BOOT = (
    "import sys, json; r = sys.argv[1]; sys.path.append(r); "
    "from worker._supervisor._zygote import main; main(int(sys.argv[2]), json.loads(sys.argv[3]))"
)
