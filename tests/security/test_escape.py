"""Network, filesystem, environment, exec and channel attacks from a real contained child."""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.security._support import run
from worker import Containment
from worker._host._backend import SubprocessBackend

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(pool_size=1)) as b:
        yield b


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


def _no_connection(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


@pytest.mark.parametrize(
    ("containment", "errno_name"),
    [
        pytest.param(Containment(), "EPERM", id="all-on"),
        pytest.param(Containment(seccomp=False, landlock=False), "ENETUNREACH", id="netns-only"),
        pytest.param(Containment(namespaces=False), "EPERM", id="seccomp-only"),
        pytest.param(
            Containment(namespaces=False, seccomp=False), "EACCES", id="landlock-tcp-only"
        ),
    ],
)
async def test_tcp_to_a_host_listener_never_connects(
    tcp_listener: socket.socket, containment: Containment, errno_name: str
) -> None:
    port = tcp_listener.getsockname()[1]
    code = (
        "import socket, errno\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "except OSError as e:\n    return errno.errorcode.get(e.errno, str(e))\n"
        "return 'connected'"
    )
    relaxed = dataclasses.replace(containment, require=frozenset(), pool_size=0)
    async with SubprocessBackend(relaxed) as b:
        out = await run(b, code)
    assert out.ok, out.detail
    assert out.value == errno_name
    assert _no_connection(tcp_listener)


async def test_udp_is_refused(backend: SubprocessBackend) -> None:
    code = (
        "import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    s.sendto(b'x', ('127.0.0.1', 53))\nexcept OSError as e:\n    return 'refused'\n"
        "return 'sent'"
    )
    assert (await run(backend, code)).value == "refused"


async def test_filesystem_unix_socket_is_refused(backend: SubprocessBackend) -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="ptc-test-"), "sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.setblocking(False)
    try:
        code = (
            "import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n"
            f"    s.connect({path!r})\nexcept OSError:\n    return 'refused'\nreturn 'connected'"
        )
        assert (await run(backend, code)).value == "refused"
        assert _no_connection(srv)
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(os.path.dirname(path))


async def test_dns_fails(backend: SubprocessBackend) -> None:
    code = (
        "import socket\ntry:\n    socket.getaddrinfo('example.com', 80)\n"
        "except OSError:\n    return 'no dns'\nreturn 'resolved'"
    )
    assert (await run(backend, code)).value == "no dns"


async def test_canary_file_outside_allowed_paths_is_unreadable(
    backend: SubprocessBackend,
) -> None:
    folder = tempfile.mkdtemp(prefix="ptc-canary-")
    secret = os.path.join(folder, "secret.txt")
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"CANARY-7f3a")
    os.close(fd)
    os.chmod(folder, 0o755)
    os.chmod(secret, 0o644)
    try:
        out = await run(backend, f"return open({secret!r}).read()")
        assert out.kind == "exception"
        assert "PermissionError" in out.detail and "CANARY" not in out.detail
        for path in ("/etc/passwd", "/root/.bashrc", "/proc/1/environ"):
            out = await run(backend, f"return open({path!r}).read()")
            assert not out.ok, path
    finally:
        os.unlink(secret)
        os.rmdir(folder)


async def test_host_environment_is_not_visible(
    backend: SubprocessBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTC_CANARY_ENV", "leak-me-9d1")
    code = (
        "import os\nenv = dict(os.environ)\ntry:\n"
        "    raw = open('/proc/self/environ', 'rb').read().decode()\n"
        "except OSError:\n    raw = ''\nreturn [env, raw]"
    )
    out = await run(backend, code)
    assert out.ok, out.detail
    assert out.value[0] == {}
    assert "leak-me" not in out.value[1]


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.execv('/bin/sh', ['sh', '-c', 'true'])",
        "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'true'])",
        "import os\nreturn os.system('true')",
    ],
)
async def test_exec_of_bin_sh_fails(backend: SubprocessBackend, code: str) -> None:
    out = await run(backend, code)
    assert out.kind == "exception" or out.value != 0


async def test_only_the_channel_is_inherited(backend: SubprocessBackend) -> None:
    code = (
        "import os, stat\nopen_fds = []\nfor fd in range(3, 64):\n    try:\n"
        "        open_fds.append([fd, stat.S_ISSOCK(os.fstat(fd).st_mode)])\n"
        "    except OSError:\n        pass\nreturn open_fds"
    )
    out = await run(backend, code)
    assert out.ok, out.detail
    assert out.value and all(is_sock for _, is_sock in out.value)


async def test_scratch_dir_is_the_writable_cwd(backend: SubprocessBackend) -> None:
    code = (
        "import os\nopen('note.txt', 'w').write('hi')\n"
        "try:\n    open('/tmp/ptc-escape.txt', 'w')\nexcept OSError:\n    return os.listdir('.')\n"
        "return 'wrote outside'"
    )
    assert (await run(backend, code)).value == ["note.txt"]


async def test_forged_frames_from_the_program_kill_the_run(backend: SubprocessBackend) -> None:
    code = (
        "import os, socket, stat, struct\n"
        "for fd in range(3, 64):\n    try:\n        if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
        "            s = socket.socket(fileno=fd)\n"
        "            s.sendall(struct.pack('>I', 9) + b'not json!')\n    except OSError:\n"
        "        pass\nimport time\ntime.sleep(5)"
    )
    out = await run(backend, code)
    assert out.kind == "protocol"
    assert (await run(backend, "return 'host fine'")).value == "host fine"
