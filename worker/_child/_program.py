"""Run a program as a module in a fresh thread and turn its end into a :class:`ProgramResult`.

A top-level ``return v`` ends it with ``v``; otherwise the value of a trailing expression
statement; otherwise ``None`` (``_source`` compiles it so). The module runs in a thread of
its own, started for it, as the thread's first frame: nothing of the runner's sits below
it, so the recursion depth is a script's (``sys.setrecursionlimit(10)`` leaves a script's
room, a recursion fails where and with the message CPython's does, whoever called
:func:`run_program`). The module ends itself (``_source``): its outermost handler hands
the exception to this runner, which formats it after the recursion limit is restored.
A restricted program runs in a copy of the caller's context (its violations are recorded
in a context variable: one more frame below it); a program that awaits at top level runs
in ``asyncio.run``. Where no thread can be started (the containment's write gate refuses
``clone``) the module runs on the caller's thread, and a thread start in the program
raises CPython's ``RuntimeError`` with a note naming the alternatives.
Exceptions become the traceback of the program's own frames, with the user's line
numbers. Failures are data, never raised.

Used by the child runtime and by the in-process fake backend, so it imports only the
standard library (and, for the restricted profile, ``_restricted``).
"""

from __future__ import annotations

import _thread
import builtins
import contextlib
import contextvars
import functools
import mmap
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterator, Sequence
from types import FunctionType, TracebackType
from typing import Any, NoReturn

from ._outcome import ProgramResult, ProgramStop, cap_detail, check_result
from ._source import (
    PROGRAM_FILENAME,
    CompiledProgram,
    CompileFailure,
    ProgramEnd,
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
    namespace: dict[str, Any] | None = None,
) -> ProgramResult:
    """Compile ``code`` for ``profile`` and run it with the SDK ``names`` as globals.

    ``namespace`` is the dict the program runs in (a session's restored globals, which the
    builtins and the SDK ``names`` are added to; it holds the program's globals after);
    a fresh one when ``None``.

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
        env = {} if namespace is None else namespace
        env.update(restricted_globals(names=names, write=sink))
        with recording_violations() as record, printing_to(sink):
            result = _run_module(compiled, env, code, sink, in_context=True)
        violations = record
    else:
        table: object = builtins
        if print_fn is not None:  # in a copy of the builtins: globals() stays the program's
            table = {**vars(builtins), "print": print_fn}
        env = {} if namespace is None else namespace
        env.update({"__builtins__": table, "__name__": "__main__", "__doc__": None, **names})
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
    *,
    in_context: bool = False,
) -> ProgramResult:
    """Run the module as the first frame of a fresh thread (``in_context``: under
    ``Context.run`` of a copy of this thread's context) and wait for its end."""
    for text in compiled.warnings:
        warn(text)
    reserve = _Reserve()
    end = _End(sys.getrecursionlimit(), final=not compiled.is_async)
    module = FunctionType(compiled.bind(end), env)  # module code: env is its globals and locals
    target: Callable[[], object] = module
    if compiled.is_async:
        target = functools.partial(_run_async, module, end)
    if in_context:
        target = functools.partial(contextvars.copy_context().run, target)
    try:
        _thread.start_new_thread(target, ())
        threads_refused = False
    except RuntimeError:
        threads_refused = True
    if threads_refused:
        # The containment refuses new threads (the keeper's write gate, a host without a
        # tmpfs for the scratch quota): the module runs here (not inside the handler above,
        # or the refusal would be the context of every exception it raises), a dozen
        # frames deeper than a script's, and a thread it starts is refused with the fix.
        with _threads_refused():
            target()
    end.finished.acquire()
    # Taken, not shared: ``end`` sits in the module's constants, so the error's traceback
    # (the module's frame) and ``end`` would make a cycle that the program's thread, still
    # unwinding, keeps alive past this run (a coroutine it left unawaited then warns late).
    error, end.error = end.error, None
    if not isinstance(error, MemoryError):
        reserve.release()
    if not end.done:
        return ProgramResult.failure("exception", "the program's thread died")
    if error is None:
        return ProgramResult(ok=True, value=None)
    if isinstance(error, ProgramReturn):
        return ProgramResult(ok=True, value=error.value)
    if isinstance(error, ProgramStop):
        return ProgramResult.failure(error.kind, error.detail)
    try:
        if isinstance(error, MemoryError):
            reserve.release()  # the program's memory is all in use: room to report it
            return ProgramResult.failure("memory-limit", _report(error, code, reserve))
        return ProgramResult.failure("exception", _report(error, code, reserve))
    finally:
        reserve.release()


class _End(ProgramEnd):
    """How one run's module ends (``_source`` calls it): the exception it let out, the
    recursion limit restored (a program may lower the process's, and whoever waits for it
    sits deeper than its thread), then the waiter woken."""

    def __init__(self, limit: int, *, final: bool) -> None:
        self.limit = limit
        self.final = final  # the module's end is the thread's (not inside asyncio.run)
        self.error: BaseException | None = None
        self.done = False
        self.finished = _thread.allocate_lock()
        self.finished.acquire()

    def caught(self) -> None:
        if self.error is None:
            self.error = sys.exc_info()[1]

    def ended(self) -> None:
        if self.final:
            self.finish()

    def finish(self) -> None:
        try:
            sys.setrecursionlimit(self.limit)
            self.done = True
        finally:
            self.finished.release()


def _run_async(module: Callable[[], Coroutine[Any, Any, object]], end: _End) -> None:
    """A module that awaits at top level: its coroutine in ``asyncio.run``."""
    import asyncio

    try:
        asyncio.run(module())
    except BaseException:  # noqa: BLE001 - asyncio.run's own failure is the program's end
        end.caught()
    finally:
        end.finish()


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
"""The note on the ``RuntimeError`` a program gets when it starts a thread where the
containment refuses threads, so the model reads the fix, not only CPython's message."""

# Where a thread is started: ``threading`` keeps its own reference to ``_thread``'s.
_THREAD_STARTS = (
    ("_thread", "start_new_thread"),
    ("_thread", "start_new"),
    ("_thread", "start_joinable_thread"),
    ("threading", "_start_new_thread"),
    ("threading", "_start_joinable_thread"),
)


def _refused_thread(*args: object, **kwargs: object) -> NoReturn:
    error = RuntimeError("can't start new thread")  # CPython's own refusal, with the fix
    error.add_note(NO_THREADS_NOTE)
    raise error


@contextlib.contextmanager
def _threads_refused() -> Iterator[None]:
    """While the module runs on the caller's thread because no thread could be started:
    every way to start one raises at once (the containment would refuse it anyway)."""
    replaced: list[tuple[object, str, object]] = []
    for module_name, name in _THREAD_STARTS:
        found = sys.modules.get(module_name)
        if found is not None and hasattr(found, name):
            replaced.append((found, name, getattr(found, name)))
            setattr(found, name, _refused_thread)
    try:
        yield
    finally:
        for owner, name, original in replaced:
            setattr(owner, name, original)


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
