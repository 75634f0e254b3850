"""A program's source as a function body: one parse and one compile for child and host."""

from __future__ import annotations

import ast

import pytest

from worker import CompileFailure, compile_program, parse_program
from worker._child._source import MAIN


@pytest.mark.parametrize(
    ("code", "message", "line", "column"),
    [
        ("yield 1", "'yield' outside function", 1, 1),
        ("x = [1]\nyield from x", "'yield' outside function", 2, 1),
        ("await x", "'await' outside function", 1, 1),
        ("if True:\n    y = (yield)", "'yield' outside function", 2, 10),
        ("x = 1\nprint(await x)", "'await' outside function", 2, 7),
    ],
)
def test_top_level_yield_and_await_are_syntax_errors_where_they_stand(
    code: str, message: str, line: int, column: int
) -> None:
    failure = parse_program(code)
    assert isinstance(failure, CompileFailure) and failure.kind == "syntax"
    assert failure.detail.startswith(f"{message} (line {line}, column {column})\n")
    assert failure.detail.endswith("\n    " + " " * (column - 1) + "^")
    assert compile_program(code, profile="python") == failure


@pytest.mark.parametrize(
    "code",
    [
        "return 1",
        "if True:\n    return 1\nreturn 2",
        "def g():\n    yield 1\nreturn list(g())",
        "def g():\n    yield from range(3)\nlist(g())",
        "async def a():\n    await b()\nreturn 1",
        "g = (x for x in range(3))\nlist(g)",
        "",
    ],
)
def test_function_bodies_parse_and_compile(code: str) -> None:
    assert isinstance(parse_program(code), ast.Module)
    compiled = compile_program(code, profile="python")
    assert not isinstance(compiled, CompileFailure), compiled
    env: dict[str, object] = {}
    exec(compiled, env)
    assert callable(env[MAIN])


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
    ],
)
def test_syntax_details_give_line_column_and_a_caret(code: str, detail: str) -> None:
    assert compile_program(code, profile="python") == CompileFailure(kind="syntax", detail=detail)


def test_errors_only_the_compiler_finds_are_syntax_with_the_users_line() -> None:
    failure = compile_program("x = 1\nnonlocal y", profile="python")
    assert isinstance(failure, CompileFailure) and failure.kind == "syntax"
    assert (
        failure.detail
        == "no binding for nonlocal 'y' found (line 2, column 1)\n    nonlocal y\n    ^"
    )
    assert isinstance(parse_program("x = 1\nnonlocal y"), ast.Module)  # parsing alone passes


def test_degenerate_source_is_a_syntax_failure_not_an_exception() -> None:
    for code in ("x = 1\0", "(" * 10_000 + ")" * 10_000, "\ud800 = 1"):
        failure = compile_program(code, profile="python")
        assert isinstance(failure, CompileFailure) and failure.kind == "syntax", code[:20]


def test_the_restricted_policy_reports_every_refusal_with_its_line() -> None:
    failure = compile_program("a = 1\n_b = 2\nexec('1')", profile="restricted")
    assert isinstance(failure, CompileFailure) and failure.kind == "policy"
    assert failure.detail.startswith("the restricted profile refuses this program: Line 2: ")
    assert "; Line 3: Exec calls are not allowed" in failure.detail
    assert not isinstance(compile_program("a = 1\n_b = 2", profile="python"), CompileFailure)


def test_syntax_comes_before_policy() -> None:
    failure = compile_program("_x = (", profile="restricted")
    assert isinstance(failure, CompileFailure) and failure.kind == "syntax"


def test_a_trailing_expression_is_the_value() -> None:
    compiled = compile_program("x = 20\nx + 22", profile="python")
    assert not isinstance(compiled, CompileFailure)
    env: dict[str, object] = {}
    exec(compiled, env)
    main = env[MAIN]
    assert callable(main) and main() == 42
