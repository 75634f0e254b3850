"""Run a host script in one reference environment and collect what it printed and left behind.

A *host script* is a Python program that uses ptc as an agent host would. :meth:`Harness.run`
writes it to a fresh directory, starts it through the wrapper (``_wrap``) with the test venv's
interpreter, and returns a :class:`HostRun`: the JSON object the script printed last, its
stderr, and what survived it (processes, files in its temp dir). Every run gets a cgroup v2
directory of its own, created by the harness; the wrapper joins it before anything else, so
whatever the run starts stays in it wherever it daemonizes, and cleanup kills that cgroup and
nothing else: never by name, uid or the machine's namespaces.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import os
import select
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.environments import _venv
from tests.environments._envs import BY_NAME
from tests.environments._venv import ROOT, TestUser

if TYPE_CHECKING:
    from worker import Containment, Limits

_CODE_HOST = Path(__file__).with_name("_code_host.py")
_RESERVED = frozenset({"host.py", "input.json", "home", "tmp", ".stdout", ".stderr"})
_counter = itertools.count()


class HostError(AssertionError):
    """A host script failed, timed out or printed no JSON object; the message has its stderr."""


@dataclass(frozen=True)
class HostRun:
    """What one host script did in one environment."""

    environment: str
    returncode: int
    output: dict[str, Any] | None
    """The last line of stdout, parsed (a JSON object), or ``None`` when it is not one."""
    stdout: str
    stderr: str
    survivors: tuple[str, ...]
    """``pid uid cmdline`` of each process of this run still alive once the host had exited
    (and a grace for exit paths in flight had passed). The harness killed them since."""
    leftovers: tuple[str, ...]
    """Names left in the host's ``TMPDIR`` when it exited (e.g. a ``ptc-run-*`` scratch dir),
    then ``cgroup PATH`` for each cgroup v2 directory left under the run's own."""

    @property
    def results(self) -> list[dict[str, Any]]:
        """The ``ToolResult`` of each program of :meth:`Harness.run_code`, as JSON."""
        assert self.output is not None
        results: list[dict[str, Any]] = self.output["results"]
        return results


class Harness:
    """Runs host scripts in the environments (as root; see :func:`tests.environments.harness`).

    ``python`` is the test venv's interpreter; ``user`` the identity of E2, E3 and E6;
    ``cgroup_base`` the cgroup v2 directory (this process's own) where each run gets its cgroup.
    """

    def __init__(self, *, python: Path, user: TestUser) -> None:
        self.python = python
        self.user = user
        self.cgroup_base = _cgroup_v2_base()
        _remove_stale_cgroups(self.cgroup_base)

    def run(
        self,
        environment: str,
        script: str,
        *,
        inputs: Any = None,
        files: Mapping[str, str | bytes] | None = None,
        timeout_s: float = 60.0,
        settle_s: float = 2.0,
        delegate_cgroup: bool = False,
        overlay_tmp: bool = False,
        check: bool = True,
    ) -> HostRun:
        """Run ``script`` as a host in ``environment``; return what it printed and left.

        The script runs with its directory as working directory, ``sys.argv[1]`` the path of
        ``inputs`` as JSON (``null`` when not given), ``files`` written beside it (root-owned,
        mode 0644: readable by the host, outside any program's allowed paths: a canary), a
        private ``HOME`` (its uid's, 0700) and ``TMPDIR`` (mode 1777, like ``/tmp``), and prints
        one JSON object as its last line.
        ``settle_s`` bounds the wait for the run's processes to end once the host has exited
        (those still alive then are ``survivors``). ``delegate_cgroup`` hands the run's
        cgroup to the environment's user, as systemd delegates a user's scope (it stays
        read-only in the environments whose cgroups are). ``overlay_tmp`` makes ``TMPDIR`` (where
        ptc makes its scratch dirs) an overlayfs whose layers lie on two tmpfs mounts, in a
        mount namespace of the run's own (then ``leftovers`` cannot see into it). With
        ``check``, a non-zero exit or a last line that is not a JSON object raises
        :class:`HostError`.
        """
        env = BY_NAME[environment]
        bad = sorted(n for n in files or {} if n in _RESERVED or "/" in n or n.startswith("."))
        if bad:
            raise ValueError(f"files: {bad} are not plain names the harness leaves free")
        uid, gid = (0, 0) if env.identity == "root" else (self.user.uid, self.user.gid)
        directory = Path(tempfile.mkdtemp(prefix=f"ptc-envsim-{environment}-", dir=_temp_base()))
        cgroup = self.cgroup_base / f"ptc-envsim-{os.getpid()}-{next(_counter)}"
        try:
            directory.chmod(0o755)
            for name, content in {
                "host.py": script,
                "input.json": json.dumps(inputs),
                **(files or {}),
            }.items():
                path = directory / name
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content)
                path.chmod(0o644)
            (directory / "home").mkdir(mode=0o700)
            os.chown(directory / "home", uid, gid)
            # Like /tmp: as root, ptc's children drop to another uid and need to reach it.
            (directory / "tmp").mkdir()
            (directory / "tmp").chmod(0o1777)
            cgroup.mkdir()
            if delegate_cgroup:
                for path in (cgroup, *(cgroup / f for f in _DELEGATED_FILES)):
                    os.chown(path, uid, gid)
            overlay = str(directory / "tmp") if overlay_tmp else None
            return self._start(
                env.name, directory, cgroup, uid, gid, timeout_s, settle_s, check, overlay
            )
        finally:
            if cgroup.exists():
                _kill_cgroup(cgroup)
            shutil.rmtree(directory, ignore_errors=True)

    def run_code(
        self,
        environment: str,
        programs: str | Sequence[str],
        *,
        containment: Containment | None = None,
        limits: Limits | None = None,
        profile: str = "python",
        timeout_s: float = 90.0,
        **run: Any,
    ) -> HostRun:
        """Run each program with ``run_code`` in one ``ToolRuntime`` (code mode) in
        ``environment``. ``containment`` and ``limits`` are ``ptc.Containment`` /
        ``ptc.Limits`` (default: ptc's defaults). ``HostRun.results`` has each ``ToolResult``
        as JSON; ``output["probe"]`` has ``SubprocessBackend(containment).probe()`` there."""
        inputs = {
            "programs": [programs] if isinstance(programs, str) else list(programs),
            "containment": None if containment is None else _fields(containment),
            "limits": None if limits is None else _fields(limits),
            "profile": profile,
        }
        return self.run(
            environment, _CODE_HOST.read_text(), inputs=inputs, timeout_s=timeout_s, **run
        )

    def _start(
        self,
        environment: str,
        directory: Path,
        cgroup: Path,
        uid: int,
        gid: int,
        timeout_s: float,
        settle_s: float,
        check: bool,
        overlay: str | None = None,
    ) -> HostRun:
        argv = [sys.executable, "-m", "tests.environments._wrap", environment]
        argv += ["--cgroup", str(cgroup), "--cwd", str(directory)]
        if overlay is not None:
            argv += ["--overlay", overlay]
        if uid:
            argv += ["--uid", str(uid), "--gid", str(gid)]
        argv += ["--", str(self.python), "host.py", str(directory / "input.json")]
        # Files, not pipes: a process the run left behind may hold them open forever.
        with open(directory / ".stdout", "w+b") as out, open(directory / ".stderr", "w+b") as err:
            host = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=_host_environment(directory, uid),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                host.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    _kill_cgroup(cgroup)
                finally:
                    host.kill()
                    host.wait()
                raise HostError(
                    f"{environment}: the host did not finish in {timeout_s} s; stderr:\n"
                    + (directory / ".stderr").read_text(errors="replace")[-6000:]
                ) from None
        survivors = () if _wait_empty(cgroup, settle_s) else _processes(cgroup)
        cgroups = [f"cgroup {Path(d).relative_to(cgroup)}" for d, _, _ in os.walk(cgroup)][1:]
        stdout = (directory / ".stdout").read_text(errors="replace")
        stderr = (directory / ".stderr").read_text(errors="replace")
        result = HostRun(
            environment=environment,
            returncode=host.returncode,
            output=_last_json_object(stdout),
            stdout=stdout,
            stderr=stderr,
            survivors=survivors,
            leftovers=(*sorted(os.listdir(directory / "tmp")), *sorted(cgroups)),
        )
        if check and (result.returncode != 0 or result.output is None):
            raise HostError(
                f"{environment}: the host exited {result.returncode}"
                + ("" if result.output is not None else " without a JSON object on stdout")
                + f"; stdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-6000:]}"
            )
        return result


class Listener:
    """A TCP socket listening on loopback, outside every environment (a network target)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.host, self.port = sock.getsockname()[:2]
        self._accepted = 0

    def accepted(self) -> int:
        """How many connections reached it so far."""
        while True:
            try:
                conn, _ = self._sock.accept()
            except BlockingIOError:
                return self._accepted
            conn.close()
            self._accepted += 1


@contextlib.contextmanager
def tcp_listener() -> Iterator[Listener]:
    """A loopback listener for network tests: pass ``.port`` in ``inputs``, then assert
    ``.accepted() == 0``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        yield Listener(sock)


_DELEGATED_FILES = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")
"""What systemd chowns when it delegates a cgroup (``Delegate=yes``)."""


def _fields(value: Any) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        out[f.name] = sorted(item) if isinstance(item, frozenset) else item
    return out


def _host_environment(directory: Path, uid: int) -> dict[str, str]:
    path = "/usr/local/bin:/usr/bin:/bin"
    return {
        "PATH": f"/usr/local/sbin:/usr/sbin:/sbin:{path}" if uid == 0 else path,
        "HOME": str(directory / "home"),
        "TMPDIR": str(directory / "tmp"),
        "LANG": "C.UTF-8",
    }


def _temp_base() -> str:
    """The temp dir, if every user can reach a directory in it; else ``/tmp``."""
    base = tempfile.gettempdir()
    path = Path(base)
    for part in (path, *path.parents):
        if not part.stat().st_mode & stat.S_IXOTH:
            return "/tmp"
    return base


def _last_json_object(stdout: str) -> dict[str, Any] | None:
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _cgroup_v2_base() -> Path:
    """This process's own cgroup v2 directory (the runs' cgroups nest under it)."""
    with open("/proc/self/cgroup", encoding="ascii") as fh:
        own = next((line.strip()[3:] for line in fh if line.startswith("0::")), None)
    for mount in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        if own is not None and (mount / "cgroup.procs").exists():
            base = mount / own.lstrip("/")
            if os.access(base, os.W_OK) and _has_cgroup_kill(base):
                return base
    raise RuntimeError(
        "the environments need a writable cgroup v2 hierarchy with cgroup.kill (Linux 5.14) "
        "to hold and clean up each run's processes"
    )


def _has_cgroup_kill(base: Path) -> bool:
    """Whether a cgroup made under ``base`` has ``cgroup.kill`` (the root cgroup has none)."""
    trial = base / f"ptc-envsim-{os.getpid()}-check"
    try:
        trial.mkdir()
    except OSError:
        return False
    try:
        return (trial / "cgroup.kill").exists()
    finally:
        trial.rmdir()


def _wait_empty(cgroup: Path, timeout_s: float) -> bool:
    """Wait (on ``cgroup.events`` notifications, at most ``timeout_s``) for no process left."""
    deadline = time.monotonic() + timeout_s
    fd = os.open(cgroup / "cgroup.events", os.O_RDONLY)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        while True:
            if b"populated 0" in os.pread(fd, 4096, 0):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            poller.poll(remaining * 1000)
    finally:
        os.close(fd)


def _processes(cgroup: Path) -> tuple[str, ...]:
    found = []
    for directory, _, _ in os.walk(cgroup):
        with open(os.path.join(directory, "cgroup.procs"), encoding="ascii") as fh:
            pids = [int(line) for line in fh if line.strip()]
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                uid = Path(f"/proc/{pid}/status").read_text().split("Uid:\t")[1].split()[0]
            except (OSError, IndexError):
                continue  # ended meanwhile
            found.append(f"{pid} uid={uid} {cmdline.decode(errors='replace').strip()}")
    return tuple(found)


def _remove_stale_cgroups(base: Path) -> None:
    """Clean up the run cgroups of harnesses that died mid-run (their pid is gone)."""
    for cgroup in base.glob("ptc-envsim-*-*"):
        owner = cgroup.name.split("-")[2]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _kill_cgroup(cgroup)


def _kill_cgroup(cgroup: Path) -> None:
    """Kill every process of this run's cgroup (and its children), then remove them all."""
    (cgroup / "cgroup.kill").write_text("1")
    if not _wait_empty(cgroup, 10.0):
        raise RuntimeError(f"processes of {cgroup} outlived cgroup.kill: {_processes(cgroup)}")
    for directory, _, _ in os.walk(cgroup, topdown=False):
        os.rmdir(directory)


def unavailable() -> str | None:
    """Why the environments cannot be simulated here (a skip reason), or ``None``."""
    reason = _venv.unavailable()
    if reason is None:
        try:
            _cgroup_v2_base()
        except RuntimeError as exc:
            return str(exc)
    return reason


@functools.cache
def harness() -> Harness:
    """The harness of this test session: the test user and the venv, made (or found in the
    cache) on the first call. Call only where :func:`unavailable` is ``None``."""
    user = _venv.ensure_user()
    with tempfile.TemporaryDirectory(prefix="ptc-envsim-build-") as work:
        python = _venv.ensure_venv(Path(work))
    return Harness(python=python, user=user)
