"""A program's source as a module: one parse and one compile for child and host."""

from __future__ import annotations

import ast
import asyncio
import inspect
import subprocess
import sys
import textwrap
import warnings

import pytest

from worker import CompileFailure, compile_program, parse_program
from worker._child._source import CompiledProgram, ProgramReturn


def compiled(code: str, profile: str = "python") -> CompiledProgram:
    program = compile_program(textwrap.dedent(code), profile=profile)
    assert isinstance(program, CompiledProgram), program
    return program


def execute(code: str) -> tuple[object, dict[str, object]]:
    """Run compiled module code as the runner does: its value, and its globals."""
    program = compiled(code)
    env: dict[str, object] = {"__name__": "__main__"}
    try:
        if program.is_async:
            asyncio.run(eval(program.code, env))
        else:
            exec(program.code, env)
    except ProgramReturn as stop:
        return stop.value, env
    return None, env


@pytest.mark.parametrize(
    ("code", "message", "line", "column"),
    [
        ("yield 1", "'yield' outside function", 1, 1),
        ("x = [1]\nyield from x", "'yield' outside function", 2, 1),
        ("if True:\n    y = (yield)", "'yield' outside function", 2, 10),
        ("class A:\n    return 1", "'return' outside function", 2, 5),
    ],
)
def test_a_top_level_yield_and_a_return_in_a_class_body_are_syntax_errors(
    code: str, message: str, line: int, column: int
) -> None:
    assert isinstance(parse_program(code), ast.Module)  # parsing alone passes
    failure = compile_program(code, profile="python")
    assert isinstance(failure, CompileFailure) and failure.kind == "syntax"
    assert failure.detail.startswith(f"{message} (line {line}, column {column})\n")
    assert failure.detail.endswith("\n    " + " " * (column - 1) + "^")


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("return 1", 1),
        ("if True:\n    return 1\nreturn 2", 1),
        ("def g():\n    yield 1\nreturn list(g())", [1]),
        ("def g():\n    yield from range(3)\nlist(g())", [0, 1, 2]),
        ("g = (x for x in range(3))\nlist(g)", [0, 1, 2]),
        ("x = 20\nx + 22", 42),
        ("x = 5", None),
        ("", None),
        ("for i in range(5):\n    if i == 3:\n        return i", 3),
        ("try:\n    return 'body'\nexcept:\n    return 'bare except'", "body"),
        ("try:\n    return 1\nexcept BaseException:\n    pass\nreturn 2", 1),
        ("try:\n    return 1\nfinally:\n    x = 2", 1),
        ("try:\n    return 1\nfinally:\n    return 2", 2),
        ("try:\n    1 / 0\nexcept ZeroDivisionError:\n    return 'handled'", "handled"),
        ("while True:\n    try:\n        return 'out'\n    except:\n        continue", "out"),
    ],
)
def test_a_top_level_return_or_a_trailing_expression_is_the_value(
    code: str, value: object
) -> None:
    assert execute(code)[0] == value


def test_module_semantics_globals_future_imports_and_qualified_names() -> None:
    value, env = execute(
        """
        from __future__ import annotations
        count = 0
        def bump():
            global count
            count += 1
        bump(); bump()
        class P:
            x: int
            def m(self):
                return type(self).__qualname__
        [count, P.__qualname__, P().m(), bump.__qualname__, P.__module__, locals() is globals()]
        """
    )
    assert value == [2, "P", "P", "bump", "__main__", True]
    assert env["count"] == 2


def test_no_name_of_the_runner_reaches_the_program() -> None:
    value, env = execute("return sorted(globals())")
    assert value == ["__builtins__", "__name__"]
    program = compiled("try:\n    return 1\nexcept:\n    pass\n2")
    assert not any("ptc" in name or "return" in name.lower() for name in program.code.co_names)
    assert ProgramReturn in program.code.co_consts  # reached through a constant, not a name


def test_top_level_await_makes_the_module_a_coroutine() -> None:
    program = compiled("import asyncio\nawait asyncio.sleep(0)\n1")
    assert program.is_async and program.code.co_flags & inspect.CO_COROUTINE
    assert execute("import asyncio\nasync def f():\n    return 3\nawait f()")[0] == 3
    assert not compiled("async def f():\n    pass\nimport asyncio\nasyncio.run(f())").is_async


def test_the_restricted_profile_awaits_too() -> None:
    code = "import asyncio\nr = await asyncio.sleep(0, 'x')"
    program = compile_program(code, profile="restricted")
    assert isinstance(program, CompiledProgram) and program.is_async


def test_the_tree_keeps_the_users_line_numbers() -> None:
    tree = parse_program("x = 1\n\ny = 2")
    assert isinstance(tree, ast.Module)
    assert [node.lineno for node in tree.body] == [1, 3]


@pytest.mark.parametrize(
    ("code", "detail"),
    [
        ("x = (", "'(' was never closed (line 1, column 5)\n    x = (\n        ^"),
        ("x = 1\ny = 2 +\n", "invalid syntax (line 2, column 8)\n    y = 2 +\n           ^"),
        (
            "for i in []:\n    pass\nbreak",
            "'break' outside loop (line 3, column 1)\n    break\n    ^",
        ),
        (
            "x = 1\nfrom __future__ import annotations",
            "from __future__ imports must occur at the beginning of the file (line 2, column 1)"
            "\n    from __future__ import annotations\n    ^",
        ),
    ],
)
def test_syntax_details_give_line_column_and_a_caret(code: str, detail: str) -> None:
    assert compile_program(code, profile="python") == CompileFailure(kind="syntax", detail=detail)


def test_errors_only_the_compiler_finds_are_syntax_with_the_users_line() -> None:
    failure = compile_program("x = 1\nnonlocal y", profile="python")
    assert isinstance(failure, CompileFailure) and failure.kind == "syntax"
    assert failure.detail.startswith("nonlocal declaration not allowed at module level (line 2")
    assert isinstance(parse_program("x = 1\nnonlocal y"), ast.Module)  # parsing alone passes


def test_degenerate_source_is_a_syntax_failure_not_an_exception() -> None:
    for code in ("x = 1\0", "(" * 10_000 + ")" * 10_000, "\ud800 = 1"):
        failure = compile_program(code, profile="python")
        assert isinstance(failure, CompileFailure) and failure.kind == "syntax", code[:20]


def test_the_restricted_policy_reports_every_refusal_with_its_line() -> None:
    failure = compile_program("a = 1\n__b__ = 2\nexec('1')", profile="restricted")
    assert isinstance(failure, CompileFailure) and failure.kind == "policy"
    assert failure.detail.startswith("the restricted profile refuses this program: Line 2: ")
    assert "; Line 3: Exec calls are not allowed" in failure.detail
    assert not isinstance(compile_program("a = 1\n__b__ = 2", profile="python"), CompileFailure)


def test_syntax_comes_before_policy() -> None:
    failure = compile_program("_x = (", profile="restricted")
    assert isinstance(failure, CompileFailure) and failure.kind == "syntax"


WARNS = 'x = 1\nif x is 1:\n    pass\ns = "\\d"\nx'


def test_compiler_warnings_are_captured_for_the_program_never_raised_or_printed(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # pytest turns warnings into errors here: a compile that let them through would fail.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program = compiled(WARNS)
        assert isinstance(parse_program(WARNS), ast.Module)
    assert program.warnings == (
        '<program>:2: SyntaxWarning: "is" with a literal. Did you mean "=="?\n  if x is 1:\n',
    )  # the invalid escape's DeprecationWarning is hidden, as CPython 3.11 hides it
    assert capfd.readouterr() == ("", "")


def test_host_side_compilation_never_writes_to_stderr() -> None:
    code = (
        "import worker\n"
        f"assert not isinstance(worker.compile_program({WARNS!r}, profile='python'), "
        "worker.CompileFailure)\n"
        f"worker.parse_program({WARNS!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, check=True
    )
    assert (done.stdout, done.stderr) == ("", "")


_SHAPES = [
    "",
    "1",
    '"""doc"""\n1',
    "from __future__ import annotations\nx = 1\nx",
    "from .__future__ import x\n1",
    "return 5",
    "if x:\n    return 2\nelse:\n    y = 3\ny",
    "try:\n    return 1\nexcept Exception:\n    pass\nfinally:\n    y = 2",
    "for i in r:\n    if i:\n        try:\n            return i\n        except ValueError:\n"
    "            return -1\n    else:\n        pass",
    "def f():\n    return 1\nclass C:\n    def g(self):\n        return 2\nf()",
    "match x:\n    case 1:\n        return 1\n    case _:\n        try:\n            return 2\n"
    "        except:\n            raise",
    "with a as f:\n    while True:\n        return f.read()\n    else:\n        return 0",
    "async def a():\n    return 1\nawait a()",
    "x = [i for i in range(3)]\n(lambda: 1)()\nreturn x",
]


@pytest.mark.parametrize("code", _SHAPES)
def test_every_node_of_the_compiled_module_is_placed_without_a_pass_over_the_tree(
    code: str,
) -> None:
    """The wrapping places each node it makes at the statement it stands for, which is what
    ``ast.fix_missing_locations`` over the whole tree did (it cost more than compiling)."""
    from worker._child._source import _as_module

    tree = parse_program(code)
    assert isinstance(tree, ast.Module)
    module = _as_module(tree, "ptc-return-token")
    placed = ast.dump(module, include_attributes=True)
    assert ast.dump(ast.fix_missing_locations(module), include_attributes=True) == placed
    for node in ast.walk(module):
        if "lineno" in node._attributes:
            assert isinstance(node.lineno, int), ast.dump(node)  # type: ignore[attr-defined]


def test_module_scope_returns_are_found_in_every_statement_list_and_nowhere_else() -> None:
    code = (
        "def f():\n    return 'f'\n"
        "match 2:\n    case 1:\n        pass\n    case _:\n"
        "        with open('/dev/null'):\n            try:\n                raise ValueError\n"
        "            except ValueError:\n                return f()\n"
    )
    compiled = compile_program(code, profile="python")
    assert isinstance(compiled, CompiledProgram)
    try:
        exec(compiled.code, {})
    except ProgramReturn as returned:
        assert returned.value == "f"
    else:
        pytest.fail("the return inside match, with and except was not the program's")
