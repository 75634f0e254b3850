"""The child runtime, driven over a real socketpair in a real subprocess (no zygote).

The test plays the host: it reads ``ready``, sends ``start``, answers ``call`` frames and
collects ``stdout``/``log`` frames until ``done`` and EOF.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sdkgen
from worker import Limits
from worker._protocol._framing import FrameDecoder, encode
from worker._protocol._messages import validate_child_frame

ROOT = Path(__file__).resolve().parents[2]

# A hand-written SDK module with the shape sdkgen generates: it uses the injected
# __transport__; `parallel` runs thunks in threads so concurrent call_batch is exercised.
SDK = textwrap.dedent(
    """
    import threading

    class ToolCallError(Exception):
        def __init__(self, tool, code, message):
            super().__init__(f"{tool}: {code}: {message}")
            self.tool, self.code, self.message = tool, code, message

    class _Tool:
        def __init__(self, name):
            self.name = name
        def __call__(self, **kwargs):
            return self.map([kwargs])[0]
        def map(self, items):
            replies = __transport__.call_batch([(self.name, dict(kw)) for kw in items])
            for ok, value in replies:
                if not ok:
                    raise ToolCallError(self.name, *value)
            return [value for _, value in replies]

    class tools:
        echo = _Tool("echo")
        add = _Tool("add")
        fail = _Tool("fail")

    def parallel(*thunks):
        results = [None] * len(thunks)
        def run(i):
            results[i] = thunks[i]()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(thunks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
    """
)

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def default_handler(call: dict[str, Any]) -> dict[str, Any]:
    args = call["arguments"]
    if call["tool"] == "echo":
        return {"ok": True, "value": args}
    if call["tool"] == "add":
        return {"ok": True, "value": args["a"] + args["b"]}
    return {"ok": False, "code": "DENIED", "message": "not allowed"}


@dataclasses.dataclass
class Run:
    frames: list[dict[str, Any]]
    returncode: int

    @property
    def done(self) -> dict[str, Any]:
        return self.frames[-1]

    @property
    def stdout(self) -> str:
        return "".join(f["data"] for f in self.frames if f["type"] == "stdout")

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == kind]


def run_child(
    code: str,
    *,
    profile: str = "python",
    limits: Limits | None = None,
    handler: Handler = default_handler,
    sdk: str = SDK,
    preload: bool = False,
) -> Run:
    host, child = socket.socketpair()
    boot = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import socket, worker._child as c; "
        f"c.serve(socket.socket(fileno={child.fileno()}), {{'cpu': "
        "{'level': 'none', 'mechanism': 'test', 'gap': 'no containment in this test'}})"
    )
    with host:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", boot],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        child.close()
        frames = _drive(host, code, sdk, profile, limits or Limits(), handler, preload)
        returncode = proc.wait(timeout=30)
    return Run(frames=frames, returncode=returncode)


def _drive(
    host: socket.socket,
    code: str,
    sdk: str,
    profile: str,
    limits: Limits,
    handler: Handler,
    preload: bool,
) -> list[dict[str, Any]]:
    decoder = FrameDecoder(validate_child_frame)
    frames: list[dict[str, Any]] = []
    host.settimeout(30)
    while True:
        data = host.recv(65536)
        if not data:
            decoder.eof()
            return frames
        for frame in decoder.feed(data):
            frames.append(frame)
            if frame["type"] == "ready":
                if preload:  # as a pool primes a child: the module first, then start
                    host.sendall(encode({"type": "sdk", "module": sdk}))
                start = {
                    "type": "start",
                    "code": code,
                    "sdk_module": "" if preload else sdk,
                    "profile": profile,
                    "limits": dataclasses.asdict(limits),
                    "session": None,
                }
                host.sendall(encode(start))
            elif frame["type"] == "call":
                for call in frame["calls"]:
                    host.sendall(encode({"type": "result", "id": call["id"], **handler(call)}))


def test_ready_comes_first_and_carries_pid_and_enforcement() -> None:
    run = run_child("return 1")
    ready = run.frames[0]
    assert ready["type"] == "ready" and ready["pid"] > 0
    assert ready["enforcement"]["cpu"]["level"] == "none"
    assert run.done == {"type": "done", "ok": True, "value": 1}
    assert run.returncode == 0


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("return {'a': [1, 2.5, None, True]}", {"a": [1, 2.5, None, True]}),
        ("x = 2\nx * 21", 42),
        ("x = 1", None),
        ("", None),
        ("if True:\n    return 'early'\nreturn 'late'", "early"),
    ],
)
def test_program_value_is_return_or_trailing_expression(code: str, value: object) -> None:
    assert run_child(code).done == {"type": "done", "ok": True, "value": value}


@pytest.mark.parametrize(
    ("code", "kind", "needle"),
    [
        ("x = (", "syntax", "line 1"),
        ("def f():\n    raise ValueError('boom')\nf()", "exception", 'File "<program>", line 2'),
        ("import sys\nsys.exit(3)", "exception", "SystemExit"),
        ("raise KeyboardInterrupt", "exception", "KeyboardInterrupt"),
        ("raise MemoryError('big')", "memory-limit", "MemoryError"),
        ("return {1, 2}", "invalid-result", "set"),
        ("return float('nan')", "invalid-result", "non-finite"),
        ("return 'x' * 2000", "invalid-result", "result_bytes"),
        (
            "async def main():\n    return 1\nmain()",
            "invalid-result",
            "not the coroutine main(...), never awaited: write `await main(...)`, or "
            "`asyncio.run(main(...))` outside async code",
        ),
        ("import json\njson.codecs", "policy", "not available"),
    ],
)
def test_failures_end_with_their_kind(code: str, kind: str, needle: str) -> None:
    profile = "restricted" if kind == "policy" else "python"
    run = run_child(code, profile=profile, limits=Limits(result_bytes=1000))
    assert run.done["ok"] is False
    assert run.done["kind"] == kind
    assert needle in run.done["detail"]
    assert run.returncode == 0


def test_traceback_shows_only_program_frames() -> None:
    run = run_child("x = 1\ntools.fail()")
    detail = run.done["detail"]
    assert 'File "<program>", line 2, in <module>' in detail
    assert "tools.fail()" in detail
    assert "<sdk>" not in detail and "_runtime" not in detail
    assert "ToolCallError: fail: DENIED: not allowed" in detail


def test_deep_recursion_detail_is_bounded() -> None:
    run = run_child("def f(n):\n    return f(n + 1)\nf(0)")
    assert run.done["kind"] == "exception"
    assert "RecursionError" in run.done["detail"]
    assert "more frames" in run.done["detail"]
    assert len(run.done["detail"]) <= 16 * 1024 + 100


def test_calls_return_values_and_raise_tool_errors() -> None:
    code = textwrap.dedent(
        """
        total = tools.add(a=1, b=2)
        try:
            tools.fail()
        except ToolCallError as e:
            err = [e.tool, e.code, e.message]
        return [total, tools.echo(x='y'), err]
        """
    )
    run = run_child(code)
    assert run.done["value"] == [3, {"x": "y"}, ["fail", "DENIED", "not allowed"]]
    ids = [c["id"] for f in run.of("call") for c in f["calls"]]
    assert ids == [1, 2, 3]


def test_stdout_keeps_its_order_relative_to_calls() -> None:
    code = "print('before')\ntools.echo(n=1)\nprint('after', end='')\ntools.echo(n=2)\nprint('end')"
    run = run_child(code)
    kinds = [
        f["data"] if f["type"] == "stdout" else f"call{f['calls'][0]['arguments']['n']}"
        for f in run.frames
        if f["type"] in ("stdout", "call")
    ]
    assert kinds == ["before\n", "call1", "after", "call2", "end\n"]


def test_stderr_is_interleaved_with_stdout() -> None:
    run = run_child("import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')")
    assert run.stdout == "a\nb\nc\n"


def test_the_programs_stdout_and_stderr_are_text_files_as_a_scripts() -> None:
    code = (
        "import io, sys\n"
        "sys.stdout.write('a\\n'); sys.stderr.write('b\\n'); sys.stdout.buffer.write(b'c\\n')\n"
        "print('\\ud800', flush=True)\n"
        "[str(type(sys.stdout)), str(type(sys.stderr)), sys.stdout.encoding, "
        "sys.stdout.isatty()]"
    )
    run = run_child(code)
    assert run.done["value"] == [
        "<class '_io.TextIOWrapper'>",
        "<class '_io.TextIOWrapper'>",
        "utf-8",
        False,
    ]
    assert run.stdout == "a\nb\nc\n\ufffd\n"


def test_compiler_warnings_are_the_programs_stderr() -> None:
    run = run_child("x = 1\nif x is 1:\n    print('one')")
    assert run.stdout == (
        '<program>:2: SyntaxWarning: "is" with a literal. Did you mean "=="?\n  if x is 1:\none\n'
    )


@pytest.mark.parametrize("profile", ["python", "restricted"])
def test_a_program_starts_as_shallow_as_a_script(profile: str) -> None:
    code = (
        "def down(n):\n    return down(n - 1) if n else 'ok'\n"
        "down(985)"  # CPython running a script gets to about 996
    )
    run = run_child(code, profile=profile)
    assert run.done["value"] == "ok", run.done


@pytest.mark.parametrize("name", ["depth", "room", "sorted"])
def test_a_program_in_a_child_sees_the_recursion_a_script_sees(name: str) -> None:
    from tests.worker.test_program import _TRY, RECURSION_AS_A_SCRIPT, _as_a_script

    code = _TRY + RECURSION_AS_A_SCRIPT[name]
    run = run_child(code)
    assert run.done["ok"] is True, run.done
    assert run.done["value"] == _as_a_script(code)


GENERATED = sdkgen.generate(
    [sdkgen.ToolSpec(name="echo", input_schema={"type": "object", "properties": {"n": {}}})]
).module


def test_awaited_calls_gather_into_one_call_frame_in_a_real_child() -> None:
    code = (
        "import asyncio\n"
        "tools.echo(n=0)\n"
        "async def main():\n"
        "    tools.echo(n=-1)\n"  # never awaited: a warning, and no call
        "    return await asyncio.gather(*[tools.echo(n=i) for i in (1, 2, 3)])\n"
        "asyncio.run(main())"
    )
    run = run_child(code, sdk=GENERATED)
    assert run.done["value"] == [{"n": 1}, {"n": 2}, {"n": 3}], run.done
    assert [[c["arguments"]["n"] for c in f["calls"]] for f in run.of("call")] == [[0], [1, 2, 3]]
    assert "RuntimeWarning: tools.echo(...) was never awaited, so the call was not made" in (
        run.stdout
    )


def test_an_unawaited_call_anywhere_names_the_call_and_the_fix_in_a_real_child() -> None:
    fix = "is the coroutine tools.echo(...), never awaited: write `await tools.echo(...)`"
    in_result = run_child(
        "import asyncio\nasync def main():\n    return [await tools.echo(n=1), tools.echo(n=2)]\n"
        "asyncio.run(main())",
        sdk=GENERATED,
    )
    assert in_result.done["kind"] == "invalid-result"
    assert in_result.done["detail"] == f"the result must be a JSON value: value[1] {fix}"
    assert "never awaited, so the call was not made" not in in_result.stdout  # said once
    as_argument = run_child("await tools.echo(n=tools.echo(n=1))", sdk=GENERATED)
    assert as_argument.done["kind"] == "exception"
    assert f"must be JSON values: value['n'] {fix}" in as_argument.done["detail"]


def test_map_sends_one_batch() -> None:
    run = run_child("return tools.add.map([{'a': i, 'b': 1} for i in range(5)])")
    assert run.done["value"] == [1, 2, 3, 4, 5]
    (call,) = run.of("call")
    assert [c["id"] for c in call["calls"]] == [1, 2, 3, 4, 5]


def test_parallel_threads_get_their_own_results() -> None:
    code = "return parallel(*[(lambda i=i: tools.add(a=i, b=100)) for i in range(8)])"
    run = run_child(code)
    assert run.done["value"] == [100 + i for i in range(8)]
    ids = [c["id"] for f in run.of("call") for c in f["calls"]]
    assert sorted(ids) == list(range(1, 9)) and ids == sorted(ids)


def test_logging_records_become_log_frames() -> None:
    code = "import logging\nlogging.getLogger('app').warning('hi %s', 42)\nprint('x')"
    run = run_child(code)
    (log,) = run.of("log")
    record = log["record"]
    assert (record["name"], record["levelname"], record["msg"]) == ("app", "WARNING", "hi 42")
    assert isinstance(record["created"], float)


def test_call_arguments_must_be_json() -> None:
    run = run_child("tools.echo(x={1, 2})")
    assert run.done["kind"] == "exception"
    assert "JSON" in run.done["detail"]
    assert run.of("call") == []


def test_call_arguments_over_the_per_call_cap_raise_in_the_program() -> None:
    # 4 MiB of arguments in one call (sent in a frame the host would kill) is refused in
    # the program; escaped text counts as what it decodes to, so 3 MiB of "é" passes.
    code = textwrap.dedent(
        """
        try:
            tools.echo(x="a" * (4 * 1024 * 1024))
        except ValueError as exc:
            refused = str(exc)
        else:
            refused = ""
        small = tools.echo.map([{"x": "é" * (1024 * 1024)}, {"x": "b" * 10}])
        return [refused, len(small[0]["x"])]
        """
    )
    run = run_child(code)
    refused, size = run.done["value"]
    assert "over the cap of 4194304 bytes per call" in refused
    assert size == 1024 * 1024
    assert len(run.of("call")) == 1


def test_call_limit_ends_the_run_even_if_caught() -> None:
    code = textwrap.dedent(
        """
        for i in range(10):
            try:
                tools.echo(i=i)
            except BaseException:
                pass
        """
    )
    run = run_child(code, limits=Limits(max_calls=3))
    assert run.done["kind"] == "call-limit"
    assert len(run.of("call")) == 3


def test_output_limit_stops_before_the_excess_is_sent() -> None:
    run = run_child(
        "while True:\n    print('x' * 99)", limits=Limits(output_bytes=100, stream_bytes=1000)
    )
    assert run.done["kind"] == "output-limit"
    assert len(run.stdout.encode()) <= 1000


def test_restricted_profile_runs_programs_and_shares_print() -> None:
    code = textwrap.dedent(
        """
        def f(x):
            print('in f', x)
            return x * 2
        print('top')
        return f(tools.add(a=1, b=1))
        """
    )
    run = run_child(code, profile="restricted")
    assert run.done["value"] == 4
    assert run.stdout == "top\nin f 2\n"


def test_thread_output_after_done_is_not_sent() -> None:
    code = textwrap.dedent(
        """
        import threading, time
        def spam():
            while True:
                print('late')
                time.sleep(0.001)
        threading.Thread(target=spam, daemon=True).start()
        time.sleep(0.01)
        return 'ok'
        """
    )
    run = run_child(code)
    assert run.done == {"type": "done", "ok": True, "value": "ok"}
    assert sum(f["type"] == "done" for f in run.frames) == 1


def test_frames_are_all_valid_json_objects() -> None:
    run = run_child("print('\\ud800 lone surrogate')\nreturn 'é'")
    assert run.done["value"] == "é"
    assert "lone surrogate" in run.stdout
    json.dumps(run.frames)


def test_precompiled_modules_are_bounded_and_broken_ones_left_to_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker._child import _runtime

    monkeypatch.setattr(_runtime, "_PRECOMPILED", {})
    modules = [f"X = {i}\n" for i in range(_runtime.PRECOMPILED_SDKS + 2)]
    for module in modules:
        assert _runtime.precompile_sdk(module)
    assert list(_runtime._PRECOMPILED) == modules[-_runtime.PRECOMPILED_SDKS :]
    assert not _runtime.precompile_sdk("def (:\n")
    loaded = _runtime.load_sdk("def (:\n")
    assert isinstance(loaded.error, SyntaxError)


def test_a_child_primed_with_an_sdk_frame_runs_in_a_clean_namespace() -> None:
    # While it waits, a primed child runs its own code paths once (off the run's critical
    # path); none of that may show in the program's namespace, output or calls.
    code = (
        "print('hi')\nn = tools.add(a=1, b=2)\n"
        "return [n, sorted(k for k in globals() if not k.startswith('__'))]"
    )
    run = run_child(code, preload=True)
    assert run.done["ok"], run.done
    assert run.done["value"] == [3, ["ToolCallError", "n", "parallel", "tools"]]
    assert run.stdout == "hi\n"
    assert [[c["id"] for c in f["calls"]] for f in run.of("call")] == [[1]]
