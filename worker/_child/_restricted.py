"""The ``restricted`` profile at run time: the globals a restricted program runs with.

Defence in depth for hosts where OS containment is partial, never the only boundary.
The program was rewritten at compile time (``_policy``); it runs with:

- the run-time guards of ``_guards`` on every attribute read, item read and write, and
  the helpers the rewritten code calls (augmented writes, bounded unpacking);
- ``import`` of the allowed modules only, each as the vetted view ``_stdlib`` builds
  (only reviewed attributes; ``functools.wraps`` and friends replaced by safe versions);
- one shared ``print`` that writes to the run's capped output, also from functions;
- builtins: RestrictedPython's safe set plus the ordinary ones a program needs (see
  :data:`EXTRA_BUILTINS`), ``type`` as ``_guards`` makes it; no ``eval``, ``exec``, ``compile``,
  ``open``, ``vars``, ``dir``, ``globals``, ``locals``; ``getattr``/``hasattr``/
  ``setattr``/``delattr`` go through the same guards.

A violation raises :class:`PolicyViolation` and ends the run with kind ``policy``, even
if the program catches it (``run_program`` records violations while the program runs).
"""

from __future__ import annotations
import __future__

import builtins
import importlib.util
import io
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

from RestrictedPython.Guards import safe_builtins

from ._classes import RESTRICTED_TYPE, ProgramClass, program_class
from ._guards import (
    VettedModule,
    check_value,
    guarded_delattr,
    guarded_getattr,
    guarded_getitem,
    guarded_hasattr,
    guarded_setattr,
    guarded_write,
    guarded_write_private,
    guarded_write_special,
)
from ._stdlib import ALLOWED_MODULES, ProgramStream, printing_to, vetted_module
from ._violations import PolicyViolation, recording_violations

__all__ = (
    "ALLOWED_MODULES",
    "EXTRA_BUILTINS",
    "PolicyViolation",
    "ProgramClass",
    "guarded_getattr",
    "guarded_write",
    "printing_to",
    "recording_violations",
    "restricted_globals",
)

# Imported by allowed C modules for themselves, through the importing frame's __import__
# (PyImport_Import passes an empty *list* as fromlist; an import statement passes None or
# a tuple): datetime.strftime/timetuple import time, datetime.strptime imports _strptime.
# The module goes to the C caller, never to the program.
_INTERNAL_IMPORTS = frozenset({"_strptime", "time"})

EXTRA_BUILTINS = tuple(
    (
        "all any ascii bin bytearray bytes classmethod dict enumerate filter format frozenset "
        "iter list map max min next object property reversed set sorted staticmethod sum "
        "super tuple zip aiter anext NotImplemented "
        # the exception classes RestrictedPython's table lacks
        "BaseExceptionGroup BlockingIOError BrokenPipeError ChildProcessError "
        "ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError "
        "EncodingWarning ExceptionGroup FileExistsError FileNotFoundError InterruptedError "
        "IsADirectoryError ModuleNotFoundError NotADirectoryError PermissionError "
        "ProcessLookupError RecursionError ResourceWarning StopAsyncIteration TimeoutError"
    ).split()
)
"""Builtins a restricted program gets besides RestrictedPython's ``safe_builtins``."""

_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "@=": operator.imatmul,
}


def _inplacevar(op: str, x: Any, y: Any) -> Any:
    fn = _INPLACE.get(op)
    if fn is None:
        raise PolicyViolation(f"augmented assignment {op!r} is not allowed")
    return fn(x, y)


class _Augmented:
    """``obj.x += v`` / ``d[k] += v``: the target read (through the guards) before ``v``
    is evaluated, then written through the write guard (``_policy`` compiles these)."""

    __slots__ = ("_current", "_store")

    def __init__(self, current: Any, store: Callable[[Any], None]) -> None:
        self._current = current
        self._store = store

    def apply(self, op: str, operand: Any) -> None:
        self._store(_inplacevar(op, self._current, operand))


def _augattr(obj: Any, name: str) -> _Augmented:
    current = guarded_getattr(obj, name)
    return _Augmented(current, lambda value: guarded_setattr(obj, name, value))


def _augitem(obj: Any, key: Any) -> _Augmented:
    current = guarded_getitem(obj, key)

    def store(value: Any) -> None:
        guarded_write(obj)[key] = value

    return _Augmented(current, store)


def _unpack_sequence(it: Any, spec: Mapping[str, Any], _getiter_: Any = iter) -> list[Any]:
    """The items a tuple target takes, as a list: without a starred target at most one
    more than it needs (so the interpreter's own "too many values to unpack" is raised
    and an endless iterator is not drained into memory)."""
    needed = spec["min_len"]
    try:
        items = iter(it)
    except TypeError:
        raise TypeError(f"cannot unpack non-iterable {type(it).__name__} object") from None
    ret = list(items) if spec.get("starred", True) else list(itertools.islice(items, needed + 1))
    if len(ret) >= needed:
        for index, child in spec["childs"]:
            ret[index] = _unpack_sequence(ret[index], child)
    return ret


def _iter_unpack_sequence(
    it: Iterable[Any], spec: Mapping[str, Any], _getiter_: Any = iter
) -> Iterator[list[Any]]:
    for item in it:
        yield _unpack_sequence(item, spec)


def _guarded_import(
    name: str,
    globals: Mapping[str, Any] | None = None,
    locals: Mapping[str, Any] | None = None,
    fromlist: tuple[str, ...] | list[str] | None = (),
    level: int = 0,
) -> ModuleType:
    if type(fromlist) is list and not fromlist and name in _INTERNAL_IMPORTS:
        return __import__(name)
    if level != 0:
        raise ImportError("attempted relative import with no known parent package")
    if name == "__future__" and fromlist:  # `from __future__ import annotations` at run time
        return _FUTURE
    if name not in ALLOWED_MODULES:
        # An ordinary, catchable ImportError (`try: import numpy` falls back as in CPython);
        # the program gets nothing either way.
        top = name.partition(".")[0]
        if top not in ALLOWED_MODULES and importlib.util.find_spec(top) is None:
            raise ModuleNotFoundError(f"No module named {top!r}", name=top)
        allowed = " ".join(sorted(ALLOWED_MODULES))
        raise ModuleNotFoundError(
            f"No module named {name!r} in the restricted profile; it allows: {allowed}",
            name=name,
        )
    module = vetted_module(name)
    for item in fromlist or ():
        if item == "*" or item.startswith("_"):
            raise PolicyViolation(f"'from {name} import {item}' is not allowed")
        check_value(getattr(module, item), f"{name}.{item}")
    return module


_guarded_import.__qualname__ = _guarded_import.__name__ = "__import__"
_FUTURE = VettedModule(
    "__future__",
    {name: getattr(__future__, name) for name in __future__.all_feature_names},
    frozenset(),
)
"""What ``from __future__ import ...`` imports: the feature flags, nothing else."""


class _SharedPrint:
    """RestrictedPython's ``_print_`` collector, redirected to the run's one output sink
    (the stock collector is function-local, so prints inside functions were lost)."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self._write = write

    def _call_print(self, *objects: Any, file: Any = None, **options: Any) -> None:
        text = io.StringIO()
        print(*objects, file=text, **options)  # CPython's own checks of sep, end, flush
        if file is not None and not isinstance(file, ProgramStream):
            raise PolicyViolation("print(file=...) is not allowed (sys.stdout and sys.stderr are)")
        self._write(text.getvalue())

    def __call__(self) -> str:
        return ""  # the `printed` variable: output already went to the shared sink


def restricted_globals(
    *, names: Mapping[str, Any], write: Callable[[str], object]
) -> dict[str, Any]:
    """Fresh globals for one restricted program: guarded builtins plus ``names`` (the SDK)."""
    table = dict(safe_builtins)
    for name in EXTRA_BUILTINS:
        table[name] = getattr(builtins, name)
    table.update(
        type=RESTRICTED_TYPE,
        getattr=guarded_getattr,
        hasattr=guarded_hasattr,
        setattr=guarded_setattr,
        delattr=guarded_delattr,
        __import__=_guarded_import,
    )
    printer = _SharedPrint(write)
    return {
        "__builtins__": table,
        "__name__": "__main__",
        "__doc__": None,
        "__metaclass__": program_class,
        "_getattr_": guarded_getattr,
        "_getitem_": guarded_getitem,
        "_getiter_": iter,
        "_write_": guarded_write,
        "_write_private_": guarded_write_private,
        "_write_special_": guarded_write_special,
        "_inplacevar_": _inplacevar,
        "_augattr_": _augattr,
        "_augitem_": _augitem,
        "_unpack_sequence_": _unpack_sequence,
        "_iter_unpack_sequence_": _iter_unpack_sequence,
        "_print_": lambda _getattr=None: printer,
        **names,
    }
