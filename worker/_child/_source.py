"""A program's source as the body of a function: parse, check, wrap, compile.

The one place that decides whether a program can run, used by the child (it runs what
:func:`compile_program` returns) and by the host's pre-flight (through
``worker.parse_program`` and ``worker.compile_program``), so both report the same
``syntax`` and ``policy`` failures with the same detail.

The code is parsed as written, so line and column numbers are the user's; its statements
then become the body of a function (a trailing expression statement becomes its
``return``). A top-level ``return`` is therefore fine, while a top-level ``yield``,
``yield from`` or ``await`` is a ``syntax`` failure: a program is neither a generator nor
a coroutine. Standard library only (the restricted profile loads RestrictedPython's
transformer through ``_restricted``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from types import CodeType
from typing import Literal

from ._outcome import cap_detail

PROGRAM_FILENAME = "<program>"
"""The file name of the program's frames in tracebacks."""
MAIN = "__ptc_main__"
"""The name of the function the program's statements become."""

MAX_PROGRAM_BYTES = 256 * 1024
"""Largest program accepted, in UTF-8 bytes (checked before anything parses it: parsing
and compiling cost about 8 s per MiB of code here, on the host and again in the child)."""

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_POLICY_PREFIX = "the restricted profile refuses this program: "
_TOO_DEEP = (
    "the program nests too deeply for Python's {stage} (an expression or block nested past "
    "its limit, e.g. thousands of terms joined by +); split it into smaller statements"
)


def program_size_problem(code: str) -> str | None:
    """Why ``code`` is too large to be a program, or ``None`` (the ``preflight`` check that
    comes before every other)."""
    size = len(code.encode("utf-8", "surrogatepass"))
    if size <= MAX_PROGRAM_BYTES:
        return None
    return (
        f"the program is {size} bytes, over the limit of {MAX_PROGRAM_BYTES} bytes "
        f"({MAX_PROGRAM_BYTES // 1024} KiB); keep data out of the source: fetch it with tools "
        "or build it in a loop"
    )


@dataclass(frozen=True, kw_only=True)
class CompileFailure:
    """Why a program cannot run at all: ``syntax`` (not a valid function body) or
    ``policy`` (the restricted profile refuses it at compile time)."""

    kind: Literal["syntax", "policy"]
    detail: str


def parse_program(code: str) -> ast.Module | CompileFailure:
    """The program's syntax tree, with the user's line numbers, or a ``syntax`` failure.

    Checks what parsing alone cannot see about a function body: no ``yield``,
    ``yield from`` or ``await`` outside a nested function. Errors the compiler finds later
    (``break`` outside a loop, say) come from :func:`compile_program`."""
    unencodable = _lone_surrogate(code)
    if unencodable is not None:
        return CompileFailure(kind="syntax", detail=unencodable)
    try:
        tree = ast.parse(code, PROGRAM_FILENAME, "exec")
    except SyntaxError as exc:
        return _syntax_failure(exc, code)
    except RecursionError:
        return CompileFailure(kind="syntax", detail=_TOO_DEEP.format(stage="parser"))
    except MemoryError:
        return CompileFailure(kind="syntax", detail="the program is too large to parse")
    except ValueError as exc:  # NUL bytes
        return CompileFailure(
            kind="syntax", detail=cap_detail(f"the program cannot be parsed: {exc}")
        )
    for node in _top_level_nodes(tree):
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
            keyword = "await" if isinstance(node, ast.Await) else "yield"
            where = (PROGRAM_FILENAME, node.lineno, node.col_offset + 1, None)
            return _syntax_failure(SyntaxError(f"'{keyword}' outside function", where), code)
    return tree


def compile_program(
    code: str, *, profile: str, tree: ast.Module | None = None
) -> CodeType | CompileFailure:
    """The program compiled as a function body for ``profile``, or why it cannot be.

    The code object defines the function :data:`MAIN` when executed; calling it runs the
    program. For ``restricted`` the tree first goes through RestrictedPython's policy
    (which rewrites it in place). ``tree``: what :func:`parse_program` already made of
    ``code``, so it is not parsed twice."""
    if tree is None:
        parsed = parse_program(code)
        if isinstance(parsed, CompileFailure):
            return parsed
        tree = parsed
    if profile == "restricted":
        from ._restricted import apply_policy

        try:
            errors = apply_policy(tree)
        except RecursionError:
            return CompileFailure(kind="syntax", detail=_TOO_DEEP.format(stage="compiler"))
        if errors:
            return CompileFailure(
                kind="policy", detail=cap_detail(_POLICY_PREFIX + "; ".join(errors))
            )
    try:
        return compile(_as_function(tree), PROGRAM_FILENAME, "exec")
    except SyntaxError as exc:
        return _syntax_failure(exc, code)
    except RecursionError:
        return CompileFailure(kind="syntax", detail=_TOO_DEEP.format(stage="compiler"))
    except MemoryError:
        return CompileFailure(kind="syntax", detail="the program is too large to compile")
    except ValueError as exc:
        return CompileFailure(
            kind="syntax", detail=cap_detail(f"the program cannot be compiled: {exc}")
        )


def _lone_surrogate(code: str) -> str | None:
    """A ``syntax`` detail when ``code`` holds a surrogate code point (not valid Unicode
    text: it cannot be encoded, so no parser reads it)."""
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = code.count("\n", 0, exc.start) + 1
        column = exc.start - (code.rfind("\n", 0, exc.start) + 1) + 1
        char = f"U+{ord(code[exc.start]):04X}"
        return (
            f"the program contains a lone surrogate ({char}) at line {line}, column {column}: "
            "source code must be valid Unicode text; write it as an escape ('\\ud800') instead"
        )
    return None


def _top_level_nodes(tree: ast.Module) -> list[ast.AST]:
    """Nodes of the program's own body, not inside nested functions, lambdas or classes."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        found.append(node)
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return found


def _as_function(tree: ast.Module) -> ast.Module:
    body = list(tree.body) or [ast.Pass(lineno=1, col_offset=0)]
    last = body[-1]
    if isinstance(last, ast.Expr):
        body[-1] = ast.copy_location(ast.Return(value=last.value), last)
    func = ast.FunctionDef(
        name=MAIN,
        args=ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=body,
        decorator_list=[],
        returns=None,
        lineno=1,
        col_offset=0,
    )
    return ast.fix_missing_locations(ast.Module(body=[func], type_ignores=[]))


def _syntax_failure(exc: SyntaxError, code: str) -> CompileFailure:
    """``msg (line L, column C)``, then the offending line with a caret under column C."""
    line = exc.lineno or 1
    column = max(exc.offset or 1, 1)
    text = exc.text
    if text is None:  # errors found when compiling the tree carry no source line
        lines = code.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
    text = text.rstrip("\r\n")
    snippet = f"\n    {text}\n    {' ' * (column - 1)}^" if text.strip() else ""
    return CompileFailure(
        kind="syntax", detail=cap_detail(f"{exc.msg} (line {line}, column {column}){snippet}")
    )
