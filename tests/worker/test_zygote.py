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
    _compile(module)  # what the zygote does with {"compile": module}
    assert module in _runtime._PRECOMPILED

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(builtins, "compile", no_compile)
    loaded = _runtime.load_sdk(module)
    assert loaded.error is None and loaded.names["MARK"] == "precompiled"


def test_the_zygote_client_does_not_send_a_module_too_large_for_one_message() -> None:
    from worker._zygote import MAX_MESSAGE, ZygoteClient

    client = ZygoteClient()
    try:
        assert not client.compile("X = 1\n" + "#" * MAX_MESSAGE)
        assert client.compile("X = 1\n")
    finally:
        client.stop()



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
