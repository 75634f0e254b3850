"""The host's handle on its zygote (``_zygote``): start it with the containment it gives every
child, ask it for children, have it compile an SDK module, stop it.

The zygote is started as ``<abs python> -I -c <boot> <project root> <control fd> <config>``:
an absolute interpreter path, isolated mode, an empty environment, stdio on ``/dev/null``, a
session of its own and no fd but its control channel. ``config`` (JSON) is the containment
(which mechanisms to use) and the backend's scratch root, where children mount their
scratch tmpfs (``<root>/scratch``, each in a mount namespace of its own) or make their
scratch dirs (``<root>/run-<n>``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys

from .._errors import WorkerError
from .._protocol._spawn_config import ChildRequest, ZygoteConfig
from .._supervisor._zygote import BOOT, MAX_SDK_MODULE_BYTES

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The ``worker`` package's directory: this module's folder's parent."""


class ZygoteClient:
    """The host's handle on one zygote process (start, spawn a child, stop)."""

    def __init__(self, config: ZygoteConfig) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self.config = config
        """What the zygote is started with (see the module docstring)."""

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the zygote (blocking for a few ms: fork+exec only, preloading is async)."""
        self.stop()
        root = self.config["root"]
        if root:  # made at the first start (and again after a zygote that removed it)
            try:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(root, 0o711)
                os.chmod(root, 0o711)  # whatever the umask: other uids' children get through
                with contextlib.suppress(FileExistsError):
                    os.mkdir(os.path.join(root, "scratch"), 0o755)
            except OSError as exc:  # a temp dir this user cannot write, say: a run's failure
                raise WorkerError(f"could not make the scratch root {root}: {exc}") from exc
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        project = os.path.dirname(_PACKAGE_DIR)
        argv = [
            os.path.abspath(sys.executable),
            "-I",
            "-c",
            BOOT,
            project,
            str(theirs.fileno()),
            json.dumps(self.config),
        ]
        try:
            self._proc = subprocess.Popen(
                argv,
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

    def request(self, cfg: ChildRequest, fds: list[int]) -> None:
        """Ask for one child (fire and forget: the zygote says hello on the child's line,
        and a failed fork is reported there). Raises ``WorkerError`` when the zygote cannot
        be reached, even restarted once."""
        msg = json.dumps({"cfg": cfg}).encode()
        for attempt in (1, 2):
            # A zygote that just died may not be reaped yet (where it is pid 1 of its own
            # namespace, its parent exits after it): its channel then refuses the request,
            # which was not delivered, and a new zygote gets it.
            control = self._channel()
            try:
                socket.send_fds(control, [msg], fds)
                return
            except OSError as exc:
                self.stop()
                if attempt == 2:
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

        Without the goodbye (a host that died) the zygote removes what its children left
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
