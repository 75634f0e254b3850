"""Run a program as a module in a fresh thread and turn its end into a :class:`ProgramResult`.

A top-level ``return v`` ends it with ``v``; otherwise the value of a trailing expression
statement; otherwise ``None`` (``_source`` compiles it so). The module runs in a thread of
its own, started for it: its frames are the first on that thread's stack, as a script's
are (``sys.setrecursionlimit(10)`` works, a recursion fails where CPython's does, whoever
called :func:`run_program`); where no thread can be started (the containment's write gate
refuses ``clone``), on the caller's. A program that awaits at top level runs in
``asyncio.run``.
Exceptions become the traceback of the program's own frames, with the user's line
numbers. Failures are data, never raised.

Used by the child runtime and by the in-process fake backend, so it imports only the
standard library (and, for the restricted profile, ``_restricted``).
"""

from __future__ import annotations

import _thread
import builtins
import contextvars
import mmap
import sys
import traceback
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from ._outcome import ProgramResult, ProgramStop, cap_detail, check_result
from ._source import (
    PROGRAM_FILENAME,
    CompiledProgram,
    CompileFailure,
    ProgramReturn,
    compile_program,
)

_KEEP_FRAMES = 20


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
    shared print sink. The compiler's warnings go to ``write`` (restricted), else to
    ``print_fn``'s stderr or ``sys.stderr``. ``stopped`` reports a stop recorded by a
    limit while the program ran; it, and then the first policy violation of a restricted
    program, win even if the program swallowed the exception.
    """
    compiled = compile_program(code, profile=profile)
    if isinstance(compiled, CompileFailure):
        return ProgramResult.failure(compiled.kind, compiled.detail)
    violations: Sequence[ProgramStop] = ()
    if profile == "restricted":
        from ._restricted import printing_to, recording_violations, restricted_globals

        sink = write if write is not None else (lambda text: print(text, end=""))
        env = restricted_globals(names=names, write=sink)
        with recording_violations() as record, printing_to(sink):
            result = _run_module(compiled, env, code, sink)
        violations = record
    else:
        table: object = builtins
        if print_fn is not None:  # in a copy of the builtins: globals() stays the program's
            table = {**vars(builtins), "print": print_fn}
        env = {"__builtins__": table, "__name__": "__main__", "__doc__": None, **names}
        result = _run_module(compiled, env, code, _stderr_writer(print_fn))
    # A limit's stop, then a guard's violation, win even if the program swallowed them.
    stop = stopped() or (violations[0] if violations else None)
    if stop is not None:
        return ProgramResult.failure(stop.kind, stop.detail)
    if result.ok:
        return check_result(result.value, result_bytes=result_bytes)
    return result


# --- internals ------------------------------------------------------------------------


def _stderr_writer(print_fn: Callable[..., None] | None) -> Callable[[str], object]:
    if print_fn is not None:
        return lambda text: print_fn(text, end="", file=sys.stderr)
    return lambda text: sys.stderr.write(text)


def _run_module(
    compiled: CompiledProgram,
    env: dict[str, Any],
    code: str,
    warn: Callable[[str], object],
) -> ProgramResult:
    """Run the module in a fresh thread (in this thread's context: a restricted run's
    violations are recorded by a context variable) and wait for its end."""
    ended = _thread.allocate_lock()
    ended.acquire()
    box: list[ProgramResult | None] = [None]  # filled in place: no allocation at the end
    limit = sys.getrecursionlimit()
    single_threaded: list[bool] = []  # set when no thread could be started for the program
    reserve = _Reserve()

    def main() -> None:  # the first frame of the program's thread
        try:
            for text in compiled.warnings:
                warn(text)
            if compiled.is_async:
                import asyncio

                asyncio.run(eval(compiled.code, env))
            else:
                exec(compiled.code, env)
            box[0] = ProgramResult(ok=True, value=None)
        except ProgramReturn as exc:
            box[0] = ProgramResult(ok=True, value=exc.value)
        except ProgramStop as exc:
            box[0] = ProgramResult.failure(exc.kind, exc.detail)
        except MemoryError as exc:
            reserve.release()  # the program's memory is all in use: room to report it
            box[0] = ProgramResult.failure("memory-limit", _report(exc, code, reserve))
        except BaseException as exc:  # noqa: BLE001 - SystemExit etc. are program failures too
            if single_threaded and _no_thread(exc):
                exc.add_note(NO_THREADS_NOTE)
            box[0] = ProgramResult.failure("exception", _report(exc, code, reserve))
        finally:
            # A program may lower the process's recursion limit; whoever waits for it
            # sits deeper than its thread and must not trip over it.
            sys.setrecursionlimit(limit)
            ended.release()

    try:
        _thread.start_new_thread(contextvars.copy_context().run, (main,))
    except RuntimeError:
        # Where the containment refuses new threads (the keeper's write gate, a host
        # without a tmpfs for the scratch quota), the program runs on this thread, a few
        # frames deeper than a script's; not inside this handler, or the refusal would be
        # the context of every exception the program raises.
        single_threaded.append(True)
    if single_threaded:
        main()
    ended.acquire()
    reserve.release()
    result = box[0]
    if result is None:
        return ProgramResult.failure("exception", "the program's thread died")
    return result


_RESERVE_BYTES = 4 << 20
"""Memory held back while a program runs and given up when it runs out: the room to format
its traceback and report it."""


class _Reserve:
    """Untouched private memory (counted by RLIMIT_DATA and RLIMIT_AS, but no page of it is
    ever resident) held while the program runs.

    Without a memory cgroup the program's limit is RLIMIT_DATA: a program that filled its
    memory gets a ``MemoryError``, and formatting that error's traceback needs memory too.
    With the program's data still alive (its globals, the traceback's frames) that could
    fail in turn, killing the program's thread with nothing reported ("the program's thread
    died" instead of ``memory-limit``). Releasing this first gives the report its room."""

    __slots__ = ("_map",)

    def __init__(self) -> None:
        try:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
            self._map: mmap.mmap | None = mmap.mmap(-1, _RESERVE_BYTES, flags=flags)
        except (OSError, ValueError):  # no room even for this: nothing to give back later
            self._map = None

    def release(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


def _report(exc: BaseException, code: str, reserve: _Reserve) -> str:
    """The failure's detail: its traceback (:func:`format_program_error`), formatted again
    with the reserve given up if memory ran out while formatting, else only its type."""
    for _ in range(2):
        try:
            return format_program_error(exc, code)
        except MemoryError:
            reserve.release()
    return _UNREPORTED.get(type(exc), _UNREPORTED[BaseException])


_UNREPORTED = {
    MemoryError: "MemoryError (out of memory; its traceback could not be formatted)",
    BaseException: "the program failed, out of memory: its error could not be formatted",
}


NO_THREADS_NOTE = (
    "This sandbox refuses new threads (its scratch quota checks each write, which needs a "
    "single thread). For concurrent tool calls use tools.<name>.map([...]), parallel(...) "
    "or asyncio.gather(...)."
)
"""Added to a program's uncaught "can't start new thread" where the containment refuses
threads, so the model reads the fix, not only CPython's message."""


def _no_thread(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is CPython's refusal to start a thread."""
    current: BaseException | None = exc
    seen: list[BaseException] = []
    while current is not None and current not in seen and len(seen) < 5:
        if isinstance(current, RuntimeError) and "can't start new thread" in str(current):
            return True
        seen.append(current)
        current = current.__cause__ or current.__context__
    return False


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
    return cap_detail("".join(parts).rstrip("\n"))


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
            lineno = frame.lineno or 0
            out.append(f'  File "{PROGRAM_FILENAME}", line {lineno}, in {frame.name}\n')
            if 0 < lineno <= len(lines) and lines[lineno - 1].strip():
                out.append(f"    {lines[lineno - 1].strip()}\n")
    try:
        out.extend(traceback.format_exception_only(type(exc), exc))
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not break reporting
        out.append(f"{type(exc).__name__}: <unprintable>\n")
    return "".join(out)


def _tb(exc: BaseException) -> TracebackType | None:
    return exc.__traceback__
