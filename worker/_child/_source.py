"""A program's source as a module: parse, check, compile.

The one place that decides whether a program can run, used by the child (it runs what
:func:`compile_program` returns) and by the host's pre-flight (through
``worker.parse_program`` and ``worker.compile_program``), so both report the same
``syntax`` and ``policy`` failures with the same detail.

A program is compiled as a module, as CPython compiles a script: its top-level names are
globals, ``from __future__`` imports may open it, its qualified names and reprs are those
of module code, and a top-level ``await`` is allowed (the code object is then a
coroutine's). On top of a module, a top-level ``return v`` ends the run with ``v``
and a trailing expression statement gives the run its value. Both become a ``raise`` of
:class:`ProgramReturn` carrying the value, which the runner catches: the class is stored
in the code object's constants (no name a program could see or shadow), and every
``try`` statement in module scope gets a first handler that lets it through, so a bare
``except:`` around a ``return`` does not swallow it (as in a function). Line and column
numbers stay the user's.

The module ends itself: its body (after the docstring and ``from __future__`` imports) is
wrapped in a ``try`` whose handler and ``finally`` call a :class:`ProgramEnd` stored in the
code object's constants, so a runner can run the module as the first frame of a thread,
with no frame of its own below it, as a script's module runs (:meth:`CompiledProgram.bind`;
``exec`` of the unbound code behaves as a plain module).

Compiling never writes to the process's stderr: the warnings the compiler emits are
captured (:attr:`CompiledProgram.warnings`), and the runner prints them to the program's
own output. Standard library only (the restricted profile loads RestrictedPython's
transformer through ``_policy``).
"""

from __future__ import annotations

import ast
import inspect
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any, Literal, TypeVar

from ._outcome import cap_detail

PROGRAM_FILENAME = "<program>"
"""The file name of the program's frames in tracebacks."""

MAX_PROGRAM_BYTES = 256 * 1024
"""Largest program accepted, in UTF-8 bytes (checked before anything parses it: parsing
and compiling cost about 8 s per MiB of code here, on the host and again in the child)."""

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_POLICY_PREFIX = "the restricted profile refuses this program: "
_TOO_DEEP = (
    "the program nests too deeply for Python's {stage} (an expression or block nested past "
    "its limit, e.g. thousands of terms joined by +); split it into smaller statements"
)
_SHOWN_WARNINGS = (SyntaxWarning,)
"""Compiler warnings a program's output shows: those CPython 3.11 shows for a script (its
``DeprecationWarning`` for an invalid escape is hidden outside ``__main__``'s own code)."""

_T = TypeVar("_T")


class ProgramReturn(BaseException):  # noqa: N818 - not an error: how a program ends
    """Raised by a top-level ``return`` or trailing expression; carries the run's value.

    A ``BaseException`` so the program's ``except Exception`` never sees it."""

    def __init__(self, value: object = None) -> None:
        super().__init__()
        self.value = value

    @classmethod
    def carrying(cls, value: object) -> ProgramReturn:
        """What the compiled ``raise`` calls (a constant called directly would make the
        compiler warn that a constant is not callable)."""
        return cls(value)


class ProgramEnd:
    """What a compiled module calls as it ends: :meth:`caught` in its outermost handler,
    with every exception the module lets out being handled, then :meth:`ended` last,
    whatever happened. A runner binds its own (:meth:`CompiledProgram.bind`); this default
    lets the exception out, as a module's code would."""

    def caught(self) -> None:
        raise  # noqa: PLE0704 - the exception the module's handler is handling

    def ended(self) -> None:
        return None


_UNBOUND = ProgramEnd()


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
    """Why a program cannot run at all: ``syntax`` (not a valid program) or ``policy``
    (the restricted profile refuses it at compile time)."""

    kind: Literal["syntax", "policy"]
    detail: str


@dataclass(frozen=True, kw_only=True)
class CompiledProgram:
    """A program ready to run: module code, and what compiling it printed."""

    code: CodeType
    """Module code; executing it raises :class:`ProgramReturn` when the program returns
    (top-level ``return`` or trailing expression) and ends normally otherwise."""
    is_async: bool
    """The program awaits at top level: evaluating ``code`` gives a coroutine to run."""
    warnings: tuple[str, ...] = ()
    """The compiler's warnings, as CPython prints them (``<program>:3: SyntaxWarning:
    ...``), for the program's stderr."""

    def bind(self, end: ProgramEnd) -> CodeType:
        """The module code calling ``end`` as it ends instead of the default
        :class:`ProgramEnd` (which lets every exception out)."""
        consts = tuple(end if c is _UNBOUND else c for c in self.code.co_consts)
        return self.code.replace(co_consts=consts)


def parse_program(code: str) -> ast.Module | CompileFailure:
    """The program's syntax tree, with the user's line numbers, or a ``syntax`` failure.

    Errors the compiler finds later (``break`` outside a loop, a top-level ``yield``)
    come from :func:`compile_program`."""
    unencodable = _lone_surrogate(code)
    if unencodable is not None:
        return CompileFailure(kind="syntax", detail=unencodable)
    try:
        tree, _ = _quietly(lambda: ast.parse(code, PROGRAM_FILENAME, "exec"))
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
    return tree


def compile_program(
    code: str, *, profile: str, tree: ast.Module | None = None
) -> CompiledProgram | CompileFailure:
    """The program compiled as a module for ``profile``, or why it cannot be.

    For ``restricted`` the tree first goes through RestrictedPython's policy (which
    rewrites it in place). ``tree``: what :func:`parse_program` already made of ``code``,
    so it is not parsed twice (it is rewritten in place)."""
    if tree is None:
        parsed = parse_program(code)
        if isinstance(parsed, CompileFailure):
            return parsed
        tree = parsed
    if profile == "restricted":
        from ._policy import apply_policy

        try:
            errors = apply_policy(tree)
        except RecursionError:
            return CompileFailure(kind="syntax", detail=_TOO_DEEP.format(stage="compiler"))
        if errors:
            return CompileFailure(
                kind="policy", detail=cap_detail(_POLICY_PREFIX + "; ".join(errors))
            )
        ast.fix_missing_locations(tree)  # what the policy made is placed where it stands
    token = f"ptc-return-{os.urandom(16).hex()}"  # not secrets: it brings OpenSSL into every child
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        module = _as_module(tree, token)
        compiled, caught = _quietly(
            lambda: compile(module, PROGRAM_FILENAME, "exec", flags=flags, dont_inherit=True)
        )
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
    slots = {token: ProgramReturn, f"{token}-end": _UNBOUND}
    consts = tuple(slots.get(c, c) if type(c) is str else c for c in compiled.co_consts)
    lines = code.splitlines()
    shown = tuple(
        _format_warning(w, lines) for w in caught if issubclass(w.category, _SHOWN_WARNINGS)
    )
    return CompiledProgram(
        code=compiled.replace(co_consts=consts),
        is_async=bool(compiled.co_flags & inspect.CO_COROUTINE),
        warnings=shown,
    )


# --- internals ------------------------------------------------------------------------

_warnings_lock = threading.Lock()


def _quietly(step: Callable[[], _T]) -> tuple[_T, list[warnings.WarningMessage]]:
    """Run a parse or compile step with its warnings recorded, not printed (nor turned
    into errors by the host's filters). The warnings machinery is process-wide state: the
    lock keeps this process's own compiles from interleaving; a warning another thread
    issues in these few milliseconds is recorded here and dropped."""
    with _warnings_lock, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = step()
    return result, caught


def _format_warning(warning: warnings.WarningMessage, lines: list[str]) -> str:
    lineno = int(warning.lineno or 0)
    line = lines[lineno - 1] if 0 < lineno <= len(lines) else None
    return warnings.formatwarning(warning.message, warning.category, PROGRAM_FILENAME, lineno, line)


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


def _statement_lists(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """``body`` and every statement list beneath it in the same scope (the bodies of
    ``if``, loops, ``with``, ``try`` and its handlers, ``match`` cases), never those of a
    function or class. Statements only: no expression holds a statement, so the program's
    expressions are never walked (a walk of every node cost more than compiling)."""
    todo = [body]
    while todo:
        statements = todo.pop()
        yield statements
        for node in statements:
            if isinstance(node, _SCOPES):
                continue
            for value in node.__dict__.values():
                if type(value) is not list or not value:
                    continue
                first = value[0]
                if isinstance(first, ast.stmt):
                    todo.append(value)
                elif isinstance(first, (ast.excepthandler, ast.match_case)):
                    todo.extend(part.body for part in value)


def _at(where: ast.AST) -> dict[str, Any]:
    """The location of ``where``, for a node made in its place (``ast.copy_location``
    without a node to copy to: every node made here gets one, so no pass over the whole
    tree has to fix missing ones)."""
    return {
        "lineno": where.lineno,  # type: ignore[attr-defined]
        "col_offset": where.col_offset,  # type: ignore[attr-defined]
        "end_lineno": getattr(where, "end_lineno", None),
        "end_col_offset": getattr(where, "end_col_offset", None),
    }


_START = {"lineno": 1, "col_offset": 0, "end_lineno": 1, "end_col_offset": 0}
"""Where a statement the program does not have is placed (an empty program's body)."""


def _as_module(tree: ast.Module, token: str) -> ast.Module:
    """``tree`` with module-scope ``return`` and the trailing expression turned into
    raises of the constant ``token`` (replaced by :class:`ProgramReturn` after compiling),
    and a first handler re-raising it in every ``try`` of module scope. Only statement
    lists are walked, and only the nodes made here are placed (at the statement they
    stand for)."""

    def stop(value: ast.expr | None, where: ast.AST) -> ast.Raise:
        at = _at(where)
        carrying = ast.Attribute(
            value=ast.Constant(token, **at), attr="carrying", ctx=ast.Load(), **at
        )
        call = ast.Call(func=carrying, args=[value or ast.Constant(None, **at)], keywords=[], **at)
        return ast.Raise(exc=call, cause=None, **at)

    body = list(tree.body)
    found = False
    for statements in _statement_lists(body):
        for i, node in enumerate(statements):
            if isinstance(node, ast.Return):
                statements[i] = stop(node.value, node)
                found = True
    if body and isinstance(body[-1], ast.Expr):
        body[-1] = stop(body[-1].value, body[-1])
    if found:
        for statements in _statement_lists(body):
            for node in statements:
                if isinstance(node, ast.Try) and node.handlers:
                    at = _at(node.handlers[0])
                    guard = ast.ExceptHandler(
                        type=ast.Constant(token, **at),
                        name=None,
                        body=[ast.Raise(exc=None, cause=None, **at)],
                        **at,
                    )
                    node.handlers.insert(0, guard)
    return ast.Module(body=_ending_itself(body, f"{token}-end"), type_ignores=tree.type_ignores)


def _ending_itself(body: list[ast.stmt], token: str) -> list[ast.stmt]:
    """``body`` wrapped in ``try: ... except: <end>.caught() finally: <end>.ended()``, the
    constant ``token`` replaced by a :class:`ProgramEnd` after compiling. The docstring
    and the ``from __future__`` imports stay in front (they must open the module)."""
    head = 0
    if len(body) > 1 and isinstance(body[0], ast.Expr):
        docstring = body[0].value
        head = int(isinstance(docstring, ast.Constant) and isinstance(docstring.value, str))
    while (
        head < len(body)
        and isinstance(body[head], ast.ImportFrom)
        and body[head].module == "__future__"  # type: ignore[attr-defined]
    ):
        head += 1
    for i, node in enumerate(body[:head]):
        if isinstance(node, ast.ImportFrom) and node.level:
            # `from .__future__ import x` is an ordinary import, which the compiler still
            # wants at the top (it matches the name, not the level) and which fails in a
            # program (there is no package): outside the handler it would kill the
            # program's thread. `from . import __future__` fails the same way, inside it.
            at = _at(node)
            body[i] = ast.ImportFrom(
                module=None, names=[ast.alias("__future__", **at)], level=node.level, **at
            )
            head = min(head, i)
    rest = body[head:] or [ast.Pass(**_START)]
    at = _at(rest[0])

    def call(method: str) -> ast.stmt:
        # A method of the constant: a constant called directly makes the compiler warn.
        func = ast.Attribute(value=ast.Constant(token, **at), attr=method, ctx=ast.Load(), **at)
        return ast.Expr(ast.Call(func=func, args=[], keywords=[], **at), **at)

    handler = ast.ExceptHandler(type=None, name=None, body=[call("caught")], **at)
    wrapper = ast.Try(body=rest, handlers=[handler], orelse=[], finalbody=[call("ended")], **at)
    return [*body[:head], wrapper]


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
