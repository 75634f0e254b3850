"""Programs as modules: values, syntax/exception/result failures, tracebacks."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from worker._child import _program
from worker._child._outcome import ProgramResult, ProgramStop, check_result
from worker._child._program import run_program


def run(code: str, *, result_bytes: int = 10_000, **names: Any) -> ProgramResult:
    printed: list[str] = []
    return run_program(
        code,
        profile="python",
        names=names,
        result_bytes=result_bytes,
        print_fn=lambda *a, **k: printed.append(" ".join(map(str, a))),
    )


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("return 1", 1),
        ("1\n2\n3", 3),
        ("x = 5", None),
        ("# only a comment", None),
        ("for i in range(3):\n    pass\ni", 2),
        ("def f():\n    return 7\nf()", 7),
        ("x = [1]\ndef g():\n    x.append(2)\ng()\nreturn x", [1, 2]),
        ("class A:\n    def v(self):\n        return A\nA().v() is A", True),
        ("return {'k': [1.5, None, 'é']}", {"k": [1.5, None, "é"]}),
    ],
)
def test_values(code: str, value: object) -> None:
    result = run(code)
    assert result.ok, result.detail
    assert result.value == value


def test_names_are_visible_to_the_program() -> None:
    assert run("tools * 2", tools=21).value == 42


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ("x = (", "line 1"),
        ("a = 1\nb = = 2", "line 2"),
        ("yield 5", "'yield' outside function"),
        ("x = 1\0", "null"),
        ("nonlocal x", "nonlocal"),
    ],
)
def test_syntax_errors(code: str, needle: str) -> None:
    result = run(code)
    assert result.kind == "syntax"
    assert needle in result.detail


# What compiling a program as the body of a hidden function got wrong (issue 23): each
# ends here as it ends in CPython running the same code as a script.
@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("count = 0\ndef bump():\n    global count\n    count += 1\nbump()\ncount", 1),
        ("from __future__ import annotations\ndef f(x: Undefined) -> int:\n    return x\nf(3)", 3),
        (
            "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nrepr(P(1))",
            "P(x=1)",
        ),
        ("class A:\n    pass\nrepr(A)", "<class '__main__.A'>"),
        ("def f():\n    def g():\n        pass\n    return g\nf().__qualname__", "f.<locals>.g"),
        ("x = 1\nsorted(k for k in locals() if not k.startswith('__'))", ["x"]),
        ("locals() is globals() and __name__ == '__main__'", True),
        ("try:\n    y\nexcept NameError as e:\n    return type(e).__name__", "NameError"),
    ],
)
def test_a_program_has_a_modules_semantics(code: str, value: object) -> None:
    result = run(code)
    assert result.ok, result.detail
    assert result.value == value


def test_no_wrapper_name_appears_in_errors() -> None:
    detail = run("def f(a):\n    pass\nf()").detail
    assert detail.endswith("TypeError: f() missing 1 required positional argument: 'a'")
    assert "<module>" in detail and "locals>" not in detail


def test_a_program_starts_at_the_bottom_of_its_own_stack() -> None:
    # As a script: setrecursionlimit(10) leaves room for a few calls, whoever runs it.
    limit = sys.getrecursionlimit()
    try:
        code = (
            "import sys\nsys.setrecursionlimit(10)\n"
            "def down(n):\n    return down(n - 1) if n else 'ok'\ndown(5)"
        )
        assert run(code).value == "ok"
        assert sys.getrecursionlimit() == limit  # the caller is not left with the program's
    finally:
        sys.setrecursionlimit(limit)


# What a script sees of its recursion: the depth its module runs at (the smallest limit
# it may set), a lowered limit's room, and which of CPython's two messages a runaway
# recursion ends with (the plain one, or "while calling a Python object" when the limit
# is hit at a C call): from pydantic-monty's own cases (recursion__limit_depth,
# recursion__nested_eval).
RECURSION_AS_A_SCRIPT = {
    "depth": (
        "import sys\nlimit = sys.getrecursionlimit()\nfound = None\n"
        "for n in range(1, 50):\n    try:\n        sys.setrecursionlimit(n)\n"
        "    except RecursionError:\n        continue\n    found = n\n    break\n"
        "sys.setrecursionlimit(limit)\nfound"
    ),
    "room": (
        "import sys\nsys.setrecursionlimit(10)\n"
        "def down(n):\n    return down(n - 1) + 1 if n else 0\n"
        "deepest = max(n for n in range(12) if not isinstance(_try(down, n), Exception))\n"
        "[deepest, str(_try(down, 100))]"
    ),
    "sorted": ("def f(x):\n    return sorted([x], key=f)\nstr(_try(f, 1))"),
    "map": ("def f(x):\n    return list(map(f, [x]))\nstr(_try(f, 1))"),
    "nested": ("def f(x):\n    return f(x + 1)\ne = _try(f, 0)\n[type(e).__name__, str(e)]"),
}
_TRY = (
    "def _try(fn, *args):\n    try:\n        return fn(*args)\n"
    "    except RecursionError as exc:\n        return exc\n"
)


def _as_a_script(code: str) -> object:
    """The program's value when CPython runs it as a script (the last line printed)."""
    import ast
    import json
    import subprocess

    body = ast.parse(code).body
    last = ast.unparse(body[-1])
    head = "\n".join(ast.unparse(node) for node in body[:-1])
    script = f"import json\n{head}\nprint(json.dumps({last}))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", sorted(RECURSION_AS_A_SCRIPT))
def test_a_program_sees_the_recursion_a_script_sees(name: str) -> None:
    limit = sys.getrecursionlimit()
    code = _TRY + RECURSION_AS_A_SCRIPT[name]
    try:
        # A script starts at CPython's default; this process may run above it (another
        # test's library raised it), and a C-level recursion that deep can overflow the
        # program thread's stack, which ends the whole test process.
        sys.setrecursionlimit(1000)
        result = run(code)
        assert result.ok, result.detail
        assert result.value == _as_a_script(code)
        assert sys.getrecursionlimit() == 1000  # the caller is not left with the program's
    finally:
        sys.setrecursionlimit(limit)


def test_a_program_that_lowers_the_limit_and_fails_still_gets_its_traceback() -> None:
    # The runner formats the failure after the limit is restored: it never dies under it.
    limit = sys.getrecursionlimit()
    try:
        result = run("import sys\nsys.setrecursionlimit(10)\ndef f():\n    f()\nf()")
        assert result.kind == "exception"
        assert result.detail.startswith("Traceback (most recent call last):")
        assert result.detail.endswith("RecursionError: maximum recursion depth exceeded")
    finally:
        sys.setrecursionlimit(limit)


def test_compiler_warnings_go_to_the_programs_stderr() -> None:
    printed: list[tuple[str, object]] = []
    result = run_program(
        "x = 1\nif x is 1:\n    pass\nx",
        profile="python",
        names={},
        result_bytes=100,
        print_fn=lambda *a, file=None, **k: printed.append((" ".join(map(str, a)), file)),
    )
    assert result.value == 1
    assert printed == [
        (
            '<program>:2: SyntaxWarning: "is" with a literal. Did you mean "=="?\n  if x is 1:\n',
            sys.stderr,
        )
    ]


def test_yield_inside_a_nested_function_is_fine() -> None:
    assert run("def g():\n    yield 1\nlist(g())").value == [1]


def test_traceback_keeps_program_frames_and_user_line_numbers() -> None:
    code = "x = 1\n\ndef inner():\n    return {}['missing']\n\ninner()"
    detail = run(code).detail
    assert detail.splitlines() == [
        "Traceback (most recent call last):",
        '  File "<program>", line 6, in <module>',
        "    inner()",
        '  File "<program>", line 4, in inner',
        "    return {}['missing']",
        "KeyError: 'missing'",
    ]


def test_chained_exceptions_are_shown() -> None:
    code = "try:\n    1/0\nexcept ZeroDivisionError as e:\n    raise ValueError('wrapped') from e"
    detail = run(code).detail
    assert "ZeroDivisionError" in detail and "direct cause" in detail
    assert detail.endswith("ValueError: wrapped")


def test_frames_outside_the_program_are_removed() -> None:
    def helper() -> None:
        raise RuntimeError("from a helper")

    detail = run("helper()", helper=helper).detail
    assert "test_program.py" not in detail
    assert detail.endswith("RuntimeError: from a helper")


def test_huge_exception_messages_are_capped() -> None:
    detail = run("raise ValueError('x' * 100000)").detail
    assert len(detail) < 17_000 and "characters omitted" in detail


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("raise SystemExit(1)", "exception"),
        ("raise KeyboardInterrupt", "exception"),
        ("raise MemoryError", "memory-limit"),
        ("def f():\n    f()\nf()", "exception"),
    ],
)
def test_base_exceptions_are_program_failures(code: str, kind: str) -> None:
    assert run(code).kind == kind


def test_a_program_stop_ends_with_its_kind_even_if_swallowed() -> None:
    stop = ProgramStop("call-limit", "too many")

    def trip() -> None:
        raise stop

    result = run_program(
        "try:\n    trip()\nexcept BaseException:\n    pass\nreturn 1",
        profile="python",
        names={"trip": trip},
        result_bytes=100,
        stopped=lambda: stop,
    )
    assert (result.kind, result.detail) == ("call-limit", "too many")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ((1, 2), "tuple"),
        ({1: "a"}, "non-string key"),
        (float("inf"), "non-finite"),
        ({"a": [object()]}, "value['a'][0] is a object"),
        (b"bytes", "bytes"),
    ],
)
def test_non_json_results_are_invalid(value: object, needle: str) -> None:
    result = check_result(value, result_bytes=1000)
    assert result.kind == "invalid-result"
    assert needle in result.detail


def test_cyclic_and_deep_results_are_invalid() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert check_result(cyclic, result_bytes=1000).kind == "invalid-result"
    deep: list[object] = []
    for _ in range(1000):
        deep = [deep]
    assert "nested deeper" in check_result(deep, result_bytes=10**6).detail


def test_result_size_is_measured_as_utf8_json() -> None:
    assert check_result("é" * 10, result_bytes=22).ok  # 20 bytes + 2 quotes
    assert check_result("é" * 10, result_bytes=21).kind == "invalid-result"


def test_done_frames() -> None:
    assert ProgramResult(ok=True, value=[1]).as_frame() == {
        "type": "done",
        "ok": True,
        "value": [1],
    }
    assert ProgramResult.failure("syntax", "bad").as_frame() == {
        "type": "done",
        "ok": False,
        "kind": "syntax",
        "detail": "bad",
    }


def test_where_no_thread_can_start_the_program_runs_on_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The keeper's write gate refuses clone: the program still runs, on this thread.
    import _thread

    def refused(*args: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_thread, "start_new_thread", refused)
    assert run("import threading\nthreading.current_thread() is threading.main_thread()").ok
    assert run("x = 2\nx * 21").value == 42


def test_where_no_thread_can_start_a_programs_thread_fails_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import _thread

    def refused(*args: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_thread, "start_new_thread", refused)
    result = run("import _thread\n_thread.start_new_thread(print, ())")
    assert result.kind == "exception"
    assert "can't start new thread" in result.detail
    assert "refuses new threads" in result.detail and "parallel(" in result.detail
    # Caught by the program: nothing to add; a thread refused elsewhere: no note.
    assert (
        run(
            "import _thread\ntry:\n    _thread.start_new_thread(print, ())\n"
            "except RuntimeError:\n    pass\n'ok'"
        ).value
        == "ok"
    )
    other = run("raise RuntimeError('other')").detail
    # The runner's own refused start is never the context of the program's errors.
    assert "refuses new threads" not in other and "can't start new thread" not in other


def test_a_refused_thread_gets_no_note_where_threads_can_start() -> None:
    result = run('raise RuntimeError("can\'t start new thread")')
    assert result.kind == "exception" and "refuses new threads" not in result.detail


FORMAT = _program.format_program_error


class Exhausted:
    """``format_program_error`` as it fails with every byte in use: ``MemoryError`` for
    the first ``failures`` calls, then the real one."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, exc: BaseException, code: str) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise MemoryError
        return FORMAT(exc, code)


@pytest.mark.parametrize(
    ("failures", "detail"),
    [
        (1, "MemoryError: too big"),  # formatted again once the reserve is given up
        (2, "MemoryError (out of memory; its traceback could not be formatted)"),
    ],
)
def test_a_program_out_of_memory_is_memory_limit_even_if_its_report_runs_out_too(
    monkeypatch: pytest.MonkeyPatch, failures: int, detail: str
) -> None:
    # A program that filled its RLIMIT_DATA: formatting its MemoryError needs memory too,
    # and a failure there must not kill the program's thread with nothing reported.
    monkeypatch.setattr(_program, "format_program_error", Exhausted(failures))
    result = run("raise MemoryError('too big')")
    assert (result.ok, result.kind) == (False, "memory-limit")
    assert result.detail.endswith(detail)


def test_another_error_out_of_memory_while_reported_is_still_the_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_program, "format_program_error", Exhausted(2))
    result = run("raise ValueError('bad')")
    assert (result.ok, result.kind) == (False, "exception")
    assert "out of memory" in result.detail


def test_the_reserve_is_given_up_when_memory_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    released: list[bool] = []
    real = _program._Reserve.release

    def release(self: Any) -> None:
        released.append(self._map is not None)
        real(self)

    monkeypatch.setattr(_program._Reserve, "release", release)
    run("raise MemoryError")
    assert released[0] is True  # held while the program ran, given up at its MemoryError


@pytest.mark.filterwarnings("ignore::ImportWarning")  # CPython's, as a script gets it
@pytest.mark.parametrize(
    "code",
    ["from .__future__ import annotations\n", '"""doc"""\nfrom ..__future__ import division\n'],
)
def test_a_relative_import_named_future_is_an_ordinary_import_inside_the_program(
    code: str,
) -> None:
    # Only `from __future__ import ...` opens the module ahead of its handler; a relative
    # import of a module with that name fails as a program's import does (it escaped the
    # handler, killed the program's thread and left its runner waiting for ever).
    result = run(code)
    assert (result.ok, result.kind) == (False, "exception")
    assert result.detail.endswith(
        "ImportError: attempted relative import with no known parent package"
    ), result.detail
