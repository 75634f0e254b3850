"""The ``restricted`` profile: RestrictedPython with the hardened guard set.

Defence in depth for hosts where OS containment is partial, never the only boundary.
On top of RestrictedPython's compile-time rules (no ``_`` names, no ``async``, no
``match``, no ``eval``/``exec``, no ``obj.x += 1``) a program runs with:

- the run-time guards of ``_guards`` on every attribute read, item read and write;
- ``import`` of the allowed modules only, each as the vetted view ``_stdlib`` builds
  (only reviewed attributes; ``functools.wraps`` and friends replaced by safe versions);
- one shared ``print`` that writes to the run's capped output, also from functions;
- no ``operator``, ``type``, ``vars``, ``dir``; ``getattr``/``hasattr``/``setattr`` go
  through the same guards.

A violation raises :class:`PolicyViolation` and ends the run with kind ``policy``, even
if the program catches it (``run_program`` records violations while the program runs).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)
from RestrictedPython.transformer import RestrictingNodeTransformer

from ._guards import (
    PolicyViolation,
    ProgramClass,
    check_value,
    guarded_delattr,
    guarded_getattr,
    guarded_getitem,
    guarded_hasattr,
    guarded_setattr,
    guarded_write,
    recording_violations,
)
from ._stdlib import ALLOWED_MODULES, vetted_module

__all__ = (
    "ALLOWED_MODULES",
    "PolicyViolation",
    "ProgramClass",
    "apply_policy",
    "guarded_getattr",
    "guarded_write",
    "recording_violations",
    "restricted_globals",
)

# Imported by allowed C modules for themselves, through the importing frame's __import__
# (PyImport_Import passes an empty *list* as fromlist; an import statement passes None or
# a tuple): datetime.strftime/timetuple import time, datetime.strptime imports _strptime.
# The module goes to the C caller, never to the program.
_INTERNAL_IMPORTS = frozenset({"_strptime", "time"})

_EXTRA_BUILTINS = (
    "all any dict enumerate list tuple set frozenset max min sum sorted reversed zip map "
    "filter iter next".split()
)
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


_NO_ASYNC = (
    "the restricted profile has no async/await: call tools synchronously "
    "(r = tools.x(...)); for several calls at once use tools.x.map([...]) or parallel(...)"
)


class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's transformer with ptc's changes (see the module docstring)."""

    def _no_async(self, node: ast.AST) -> None:
        self.error(node, _NO_ASYNC)

    visit_AsyncFunctionDef = visit_Await = visit_AsyncFor = visit_AsyncWith = _no_async  # noqa: N815


def apply_policy(tree: ast.Module) -> list[str]:
    """Rewrite ``tree`` in place with the profile's transformer; return its errors."""
    errors: list[str] = []
    warnings: list[str] = []
    used_names: dict[str, bool] = {}
    _Policy(errors, warnings, used_names).visit(tree)
    return errors


def _inplacevar(op: str, x: Any, y: Any) -> Any:
    fn = _INPLACE.get(op)
    if fn is None:
        raise PolicyViolation(f"augmented assignment {op!r} is not allowed")
    return fn(x, y)


def _apply(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return f(*args, **kwargs)


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
        raise PolicyViolation("relative imports are not allowed")
    if name not in ALLOWED_MODULES:
        allowed = " ".join(sorted(ALLOWED_MODULES))
        raise PolicyViolation(f"import of {name!r} is not allowed; allowed modules: {allowed}")
    module = vetted_module(name)
    for item in fromlist or ():
        if item == "*" or item.startswith("_"):
            raise PolicyViolation(f"'from {name} import {item}' is not allowed")
        check_value(getattr(module, item), f"{name}.{item}")
    return module


class _SharedPrint:
    """RestrictedPython's ``_print_`` collector, redirected to the run's one output sink
    (the stock collector is function-local, so prints inside functions were lost)."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self._write = write

    def _call_print(
        self,
        *objects: Any,
        sep: str | None = " ",
        end: str | None = "\n",
        file: Any = None,
        flush: bool = False,
    ) -> None:
        if file is not None:
            raise PolicyViolation("print(file=...) is not allowed")
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        self._write(sep.join(str(o) for o in objects) + end)

    def __call__(self) -> str:
        return ""  # the `printed` variable: output already went to the shared sink


def restricted_globals(
    *, names: Mapping[str, Any], write: Callable[[str], object]
) -> dict[str, Any]:
    """Fresh globals for one restricted program: guarded builtins plus ``names`` (the SDK)."""
    import builtins as real

    table = dict(safe_builtins)
    for name in _EXTRA_BUILTINS:
        table[name] = getattr(real, name)
    table.update(
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
        "__metaclass__": ProgramClass,
        "_getattr_": guarded_getattr,
        "_getitem_": guarded_getitem,
        "_getiter_": iter,
        "_write_": guarded_write,
        "_inplacevar_": _inplacevar,
        "_apply_": _apply,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_print_": lambda _getattr=None: printer,
        **names,
    }
