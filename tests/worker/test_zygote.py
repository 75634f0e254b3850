"""The zygote: what it prepares once for every child it forks (compiled SDK modules, the
seccomp filter), and its client's messages."""

from __future__ import annotations

import os
import socket

import pytest

from tests.worker.test_child_runtime import SDK


def test_a_precompiled_sdk_module_is_executed_without_compiling_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from worker._child import _runtime
    from worker._zygote import _compile

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
    from worker._zygote import MAX_SDK_MODULE_BYTES, ZygoteClient

    client = ZygoteClient()
    try:
        # Far over what one control message (or a socket buffer) holds: it goes in a memfd.
        assert client.compile("X = 1\n" + "#" * (4 << 20))
        assert not client.compile("#" * (MAX_SDK_MODULE_BYTES + 1))
        assert client.alive()
    finally:
        client.stop()


def test_the_zygote_reads_a_module_from_its_fd() -> None:
    from worker._zygote import _read_module

    for text, want in [("X = 'é'\n" * 1000, "X = 'é'\n" * 1000), ("\udc80", None)]:
        fd = os.memfd_create("t")
        try:
            os.write(fd, text.encode("utf-8", "surrogatepass"))
            os.lseek(fd, 0, os.SEEK_SET)
            assert _read_module(fd) == want
        finally:
            os.close(fd)


def test_a_child_loads_the_seccomp_filter_the_zygote_prepared() -> None:
    from worker import _seccomp

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
