"""The zygote: what it prepares once for every child it forks (compiled SDK modules, the
seccomp filter), and its client's messages."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security._support import cgroup_bases, run_cgroups
from tests.worker.test_child_runtime import SDK


def test_a_precompiled_sdk_module_is_executed_without_compiling_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from worker._child import _runtime
    from worker._supervisor._zygote import _compile

    monkeypatch.setattr(_runtime, "_PRECOMPILED", {})
    module = SDK + "\nMARK = 'precompiled'\n"
    _compile(module)  # what the zygote does with the module a compile message carries
    assert module in _runtime._PRECOMPILED

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(builtins, "compile", no_compile)
    loaded = _runtime.load_sdk(module)
    assert loaded.error is None and loaded.names["MARK"] == "precompiled"


def test_the_zygote_client_sends_large_modules_and_refuses_only_oversized_ones() -> None:
    from worker import Containment
    from worker._host._pool import ChildPool
    from worker._supervisor._zygote import MAX_SDK_MODULE_BYTES

    pool = ChildPool(Containment())
    client = pool.zygote
    try:
        # Far over what one control message (or a socket buffer) holds: it goes in a memfd.
        assert client.compile("X = 1\n" + "#" * (4 << 20))
        assert not client.compile("#" * (MAX_SDK_MODULE_BYTES + 1))
        assert client.alive()
    finally:
        client.stop()
        shutil.rmtree(pool.root)


def test_the_zygote_reads_a_module_from_its_fd() -> None:
    from worker._supervisor._zygote import _read_module

    for text, want in [("X = 'é'\n" * 1000, "X = 'é'\n" * 1000), ("\udc80", None)]:
        fd = os.memfd_create("t")
        try:
            os.write(fd, text.encode("utf-8", "surrogatepass"))
            os.lseek(fd, 0, os.SEEK_SET)
            assert _read_module(fd) == want
        finally:
            os.close(fd)


def test_a_child_loads_the_seccomp_filter_the_zygote_prepared() -> None:
    from worker._kernel import _seccomp

    if not _seccomp.available():
        pytest.skip("libseccomp is not available on this host")
    _seccomp.prepare()
    prepared = _seccomp._prepared
    _seccomp.prepare()  # built once
    assert _seccomp._prepared is prepared
    pid = os.fork()
    if pid == 0:  # the child: load it, then try what it denies
        code = 1
        try:
            denied = _seccomp.install()
            try:
                socket.socket()
            except PermissionError:
                code = 0 if "socket" in denied else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_requests_arrive_in_one_buffer_that_no_keeper_inherits() -> None:
    import ctypes

    from worker._supervisor._zygote import _inbox, _receive

    inbox = _inbox()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    read, write = os.pipe()
    try:
        for message in (b'{"cfg": {}}', b"x" * 70_000, b"{}"):
            socket.send_fds(ours, [message], [read, write])
            data, fds = _receive(theirs, inbox)
            assert data == message and len(fds) == 2
            for fd in fds:
                os.close(fd)
        ours.close()
        assert _receive(theirs, inbox) == (b"", [])
        address = ctypes.addressof(ctypes.c_char.from_buffer(inbox))
        pid = os.fork()
        if pid == 0:  # a keeper's view: the zygote's inbox is not mapped
            ranges = [
                [int(x, 16) for x in line.split()[0].split("-")]
                for line in Path("/proc/self/maps").read_text().splitlines()
            ]
            os._exit(int(any(lo <= address < hi for lo, hi in ranges)))
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        for fd in (read, write):
            os.close(fd)
        theirs.close()


def test_a_child_loads_the_prepared_filters_without_libseccomp() -> None:
    from worker._kernel import _seccomp

    if not _seccomp.available():
        pytest.skip("libseccomp is not available on this host")
    _seccomp.prepare()
    pid = os.fork()
    if pid == 0:  # the child: libseccomp gone, the programs the zygote made still load
        code = 1
        try:
            vars(_seccomp)["_sc"] = None
            _seccomp.install()
            try:
                os.kill(os.getppid(), 0)  # the signal filter: only its own pid
            except PermissionError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_read_only_paths_leave_out_what_a_directory_among_them_covers(
    tmp_path: Path,
) -> None:
    from worker._supervisor._zygote import _outermost

    lib = tmp_path / "lib"
    (lib / "sub").mkdir(parents=True)
    (lib / "a.so").write_text("")
    (lib / "sub" / "b.so").write_text("")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c.so").write_text("")
    (lib / "link").symlink_to(outside)  # beneath lib by name, not where Landlock looks
    alone = tmp_path / "alone.so"
    alone.write_text("")
    paths = [str(p) for p in (lib, lib / "a.so", lib / "sub", lib / "sub" / "b.so", alone)]
    assert _outermost([*paths, str(lib / "link" / "c.so")]) == sorted(
        [str(alone), str(lib), str(lib / "link" / "c.so")]
    )


def test_every_file_the_zygote_maps_stays_beneath_a_read_only_path() -> None:
    from worker._supervisor._zygote import read_only_paths

    kept = [os.path.realpath(p) for p in read_only_paths()]
    mapped = {
        line.split(None, 5)[5].strip()
        for line in Path("/proc/self/maps").read_text().splitlines()
        if len(line.split(None, 5)) == 6 and line.split(None, 5)[5].startswith("/")
    }
    for path in {os.path.realpath(p) for p in mapped if os.path.exists(p)}:
        assert any(path == k or path.startswith(k + "/") for k in kept), path
    assert not any(k.startswith(other + "/") for k in kept for other in kept)


HOST = """
import asyncio, sys
from worker import Containment, SubprocessBackend

async def main() -> None:
    backend = SubprocessBackend(Containment(require=frozenset(), pool_size=2))
    await backend.start()
    print(backend.zygote_pid, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_host_that_dies_leaves_nothing_once_its_zygote_is_gone(tmp_path: Path, how: str) -> None:
    # A host killed without closing its backend (a lost Ray node, an OOM kill): the zygote,
    # which dies with the host, kills its children and removes their scratch and cgroups,
    # and the host's scratch root, before it exits.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with subprocess.Popen(
        [sys.executable, "-c", HOST], env=env, stdout=subprocess.PIPE, text=True
    ) as host:
        try:
            assert host.stdout is not None
            zygote = int(host.stdout.readline())
            assert len(list(tmp_path.glob(f"ptc-{host.pid}-*"))) == 1  # the host's scratch root
            bases = cgroup_bases(host.pid)
            if os.geteuid() == 0:
                assert run_cgroups(bases, host.pid)  # as root, each child has its cgroups
            pidfd = os.pidfd_open(zygote)
        finally:
            host.send_signal(getattr(signal, how))
    try:
        ready, _, _ = select.select([pidfd], [], [], 30)  # readable once the zygote exited
    finally:
        os.close(pidfd)
    assert ready, "the zygote outlived its host"
    assert list(tmp_path.glob("ptc-*")) == []
    assert run_cgroups(bases, host.pid) == []


def test_a_scratch_root_that_cannot_be_made_is_a_worker_error() -> None:
    # (A temp dir the host's user cannot write, say.) Raised as the backend's own error,
    # which a run turns into its outcome, never an OSError out of the pool's background work.
    from worker import WorkerError
    from worker._host._zygote_client import ZygoteClient

    client = ZygoteClient(
        {
            "root": f"/nonexistent-{os.getpid()}/ptc-root",
            "landlock_abi_limit": None,
            "scratch_gate": False,
            "namespaces": False,
            "rlimits": True,
            "landlock": False,
            "seccomp": False,
            "drop_privileges": False,
        }
    )
    with pytest.raises(WorkerError, match="could not make the scratch root /nonexistent-"):
        client.start()
    assert not client.alive()
