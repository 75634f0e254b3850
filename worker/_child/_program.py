"""Compile and run a program as the body of a function, and turn its end into a ``done``.

The program's code is the body of ``def <program>():``. A top-level ``return v`` ends it
with ``v``; otherwise the value of a trailing expression statement; otherwise ``None``.
Line numbers stay the user's. Failures are data (:class:`ProgramResult`), never raised.

Used by the child runtime and by the in-process fake backend, so it imports only the
standard library (and, for the restricted profile, ``_restricted``).
"""

from __future__ import annotations

import ast
import builtins
import json
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, TracebackType
from typing import Any

from .._framing import json_problem

PROGRAM_FILENAME = "<program>"
_MAIN = "__ptc_main__"
_MAX_DETAIL_CHARS = 16 * 1024
_KEEP_FRAMES = 20


class ProgramStop(BaseException):
    """Ends a run from inside with a given failure kind (a limit, a policy violation).

    A ``BaseException`` so a plain ``except Exception`` in the program does not swallow
    it; whoever raises it also records it, so a program that catches it anyway still
    ends with this kind.
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True, kw_only=True)
class ProgramResult:
    """How a program ended: a JSON value, or a child failure kind with its detail."""

    ok: bool
    value: Any = None
    kind: str = ""
    detail: str = ""

    @classmethod
    def failure(cls, kind: str, detail: str) -> ProgramResult:
        return cls(ok=False, kind=kind, detail=_cap(detail))

    def as_frame(self) -> dict[str, Any]:
        if self.ok:
            return {"type": "done", "ok": True, "value": self.value}
        return {"type": "done", "ok": False, "kind": self.kind, "detail": self.detail}


def run_program(
    code: str,
    *,
    profile: str,
    names: dict[str, Any],
    result_bytes: int,
    print_fn: Callable[..., None] | None = None,
    write: Callable[[str], object] | None = None,
    stopped: Callable[[], ProgramStop | None] = lambda: None,
) -> ProgramResult:
    """Compile ``code`` for ``profile`` and run it with the SDK ``names`` as globals.

    ``print_fn`` replaces ``print`` in the python profile (the in-process fake needs it;
    the child captures ``sys.stdout`` instead); ``write`` is the restricted profile's
    shared print sink. ``stopped`` reports a stop recorded by a limit while the program
    ran (it wins even if the program swallowed the exception).
    """
    compiled = compile_program(code, profile=profile)
    if isinstance(compiled, ProgramResult):
        return compiled
    if profile == "restricted":
        from ._restricted import restricted_globals

        sink = write if write is not None else (lambda text: print(text, end=""))
        env = restricted_globals(names=names, write=sink)
    else:
        env = {"__builtins__": builtins, "__name__": "__main__", **names}
        if print_fn is not None:
            env["print"] = print_fn
    result = _call(compiled, env, code)
    stop = stopped()
    if stop is not None:
        return ProgramResult.failure(stop.kind, stop.detail)
    if result.ok:
        return check_result(result.value, result_bytes=result_bytes)
    return result


def compile_program(code: str, *, profile: str) -> CodeType | ProgramResult:
    """The program compiled as a function body, or a ``syntax`` / ``policy`` failure."""
    try:
        tree = ast.parse(code, PROGRAM_FILENAME, "exec")
    except SyntaxError as exc:
        return ProgramResult.failure("syntax", _syntax_detail(exc))
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return ProgramResult.failure("syntax", f"{type(exc).__name__}: {exc}")
    for node in _top_level_nodes(tree):
        if isinstance(node, ast.Yield | ast.YieldFrom):
            line = getattr(node, "lineno", 0)
            return ProgramResult.failure("syntax", f"'yield' outside function (line {line})")
    if profile == "restricted":
        from ._restricted import apply_policy

        errors = apply_policy(tree)
        if errors:
            return ProgramResult.failure("policy", "\n".join(errors))
    try:
        return compile(_as_function(tree), PROGRAM_FILENAME, "exec")
    except SyntaxError as exc:
        return ProgramResult.failure("syntax", _syntax_detail(exc))
    except (ValueError, RecursionError, MemoryError) as exc:
        return ProgramResult.failure("syntax", f"{type(exc).__name__}: {exc}")


def check_result(value: Any, *, result_bytes: int) -> ProgramResult:
    """Accept ``value`` only as a plain JSON value whose encoding fits ``result_bytes``."""
    problem = json_problem(value)
    if problem is not None:
        return ProgramResult.failure(
            "invalid-result", f"the result must be a JSON value: {problem}"
        )
    size = len(
        json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )
    )
    if size > result_bytes:
        return ProgramResult.failure(
            "invalid-result",
            f"the result is {size} bytes as JSON, over the limit of {result_bytes} bytes "
            "(Limits.result_bytes); return a smaller value or print a summary",
        )
    return ProgramResult(ok=True, value=value)


# --- internals ------------------------------------------------------------------------


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


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _as_function(tree: ast.Module) -> ast.Module:
    body = list(tree.body) or [ast.Pass(lineno=1, col_offset=0)]
    last = body[-1]
    if isinstance(last, ast.Expr):
        body[-1] = ast.copy_location(ast.Return(value=last.value), last)
    func = ast.FunctionDef(
        name=_MAIN,
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


def _call(compiled: CodeType, env: dict[str, Any], code: str) -> ProgramResult:
    try:
        exec(compiled, env)
        value = env.pop(_MAIN)()
    except ProgramStop as exc:
        return ProgramResult.failure(exc.kind, exc.detail)
    except MemoryError as exc:
        return ProgramResult.failure("memory-limit", format_program_error(exc, code))
    except BaseException as exc:  # noqa: BLE001 - SystemExit etc. are program failures too
        return ProgramResult.failure("exception", format_program_error(exc, code))
    return ProgramResult(ok=True, value=value)


def format_program_error(exc: BaseException, code: str) -> str:
    """The traceback of the program's own frames only, with the user's line numbers."""
    lines = code.splitlines()
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 5 and current not in chain:
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            current = current.__context__
        else:
            current = None
    parts: list[str] = []
    previous: BaseException | None = None
    for item in reversed(chain):
        if previous is not None:
            cause = item.__cause__ is previous
            parts.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if cause
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        parts.append(_format_one(item, lines))
        previous = item
    return _cap("".join(parts).rstrip("\n"))


def _format_one(exc: BaseException, lines: list[str]) -> str:
    frames = [
        frame for frame in traceback.extract_tb(_tb(exc)) if frame.filename == PROGRAM_FILENAME
    ]
    out: list[str] = []
    if frames:
        out.append("Traceback (most recent call last):\n")
        shown: list[traceback.FrameSummary | int] = list(frames)
        if len(frames) > 2 * _KEEP_FRAMES:
            omitted = len(frames) - 2 * _KEEP_FRAMES
            shown = [*frames[:_KEEP_FRAMES], omitted, *frames[-_KEEP_FRAMES:]]
        for frame in shown:
            if isinstance(frame, int):
                out.append(f"  [... {frame} more frames ...]\n")
                continue
            name = "<module>" if frame.name == _MAIN else frame.name
            lineno = frame.lineno or 0
            out.append(f'  File "{PROGRAM_FILENAME}", line {lineno}, in {name}\n')
            if 0 < lineno <= len(lines) and lines[lineno - 1].strip():
                out.append(f"    {lines[lineno - 1].strip()}\n")
    try:
        out.extend(traceback.format_exception_only(type(exc), exc))
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not break reporting
        out.append(f"{type(exc).__name__}: <unprintable>\n")
    return "".join(out)


def _tb(exc: BaseException) -> TracebackType | None:
    return exc.__traceback__


def _syntax_detail(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
    text = f"SyntaxError: {exc.msg} ({where})"
    if exc.text and exc.text.strip():
        text += f"\n    {exc.text.strip()}"
    return text


def _cap(text: str) -> str:
    if len(text) <= _MAX_DETAIL_CHARS:
        return text
    half = _MAX_DETAIL_CHARS // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters omitted] ...\n{text[-half:]}"
