"""The write gate's filter, loaded in a forked process whose listener is closed at once: a
call the filter sends to the keeper then fails with ENOSYS (nobody answers), so each call
shows which way the filter sends it: on, to the keeper, or refused with its error."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
from collections.abc import Callable

import pytest

from worker._kernel import _gate_filter, _seccomp

pytestmark = pytest.mark.skipif(not _seccomp.available(), reason="libseccomp is not available")


def _outcome(fn: Callable[[], object]) -> str:
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    except RuntimeError as exc:
        return str(exc)
    return "ok"


def test_each_call_goes_where_the_filter_says(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _seccomp.prepare()
    monkeypatch.chdir(tmp_path)
    existing = os.open("existing", os.O_CREAT | os.O_RDWR, 0o600)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(_seccomp.install_write_gate())  # nobody will answer
            calls: dict[str, Callable[[], object]] = {
                "open": lambda: os.close(os.open("existing", os.O_RDONLY)),
                "open O_CREAT": lambda: os.open("new", os.O_CREAT | os.O_WRONLY, 0o600),
                "write": lambda: os.write(existing, b"x"),
                "read": lambda: os.pread(existing, 1, 0),
                "mkdir": lambda: os.mkdir("d"),
                "setxattr": lambda: os.setxattr("existing", "user.k", b"v"),
                "ioctl FICLONE": lambda: fcntl.ioctl(existing, 0x40049409, existing),
                "ioctl FIONREAD": lambda: fcntl.ioctl(existing, 0x541B, b"\0" * 4),
                "thread": threading.Thread(target=lambda: None).start,
            }
            found = {name: _outcome(call) for name, call in calls.items()}
            theirs.send(json.dumps(found).encode())  # send is never gated
        finally:
            os._exit(0)
    theirs.close()
    with ours:
        found = json.loads(ours.recv(65536))
    os.waitpid(pid, 0)
    os.close(existing)
    assert found == {
        "open": "ok",
        "open O_CREAT": "ENOSYS",
        "write": "ENOSYS",
        "read": "ok",
        "mkdir": "ENOSYS",
        "setxattr": "ENOSYS",
        "ioctl FICLONE": "ENOTSUP",
        "ioctl FIONREAD": "ok",
        "thread": "can't start new thread",
    }


def test_calls_an_older_libseccomp_does_not_know_get_their_numbers() -> None:
    known = {"write": 1, "ioctl": 16, "clone3": 435}
    numbers = _gate_filter.gate_numbers(lambda name: known.get(name, -1))
    assert numbers[1] == "write" and numbers[16] == "ioctl" and numbers[435] == "clone3"
    assert numbers[463] == "setxattrat" and numbers[469] == "file_setattr"
    assert "open" not in numbers.values()  # an arch without it: not looked at
