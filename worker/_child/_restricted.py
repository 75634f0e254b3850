"""The ``restricted`` profile: RestrictedPython with the hardened guard set.

Defence in depth for hosts where OS containment is partial, never the only boundary.
On top of RestrictedPython's compile-time rules (no ``_`` names, no ``async``, no
``match``, no ``eval``/``exec``, no ``obj.x += 1``) the run-time guards add:

- a module allowlist (:data:`ALLOWED_MODULES`) for ``import``; every attribute or item
  whose value is a module outside the allowlist is refused (``datetime.sys``,
  ``json.codecs``), and ``from X import y`` targets are checked the same way;
- no attribute starting with ``_``, no frame/code/generator internals, no
  ``str.format``/``format_map`` and no ``string.Formatter`` (format strings walk
  attributes without a call);
- writes (``x.a = v``, ``x[k] = v``, ``del``) only into dict/list/set/bytearray/deque
  (and subclasses) and instances of classes the program defined;
- one shared ``print`` that writes to the run's capped output, also from functions;
- no ``operator``, ``type``, ``vars``, ``dir``; ``getattr``/``hasattr``/``setattr`` go
  through the same guards.

A violation raises :class:`PolicyViolation` and ends the run with kind ``policy``.
"""

from __future__ import annotations

import ast
import operator
import string
from collections import deque
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, RestrictingNodeTransformer

from ._outcome import ProgramStop

ALLOWED_MODULES = frozenset(
    "json re math statistics datetime collections itertools functools random string "
    "decimal fractions heapq bisect textwrap".split()
)
"""Modules a restricted program may import (their module-valued attributes are filtered)."""

# Imported by the standard library itself on the program's behalf (datetime.strptime
# imports it through the sandbox's __import__); the program cannot spell the name.
_INTERNAL_IMPORTS = frozenset({"_strptime"})

_EXTRA_BUILTINS = (
    "all any dict enumerate list tuple set frozenset max min sum sorted reversed zip map "
    "filter iter next".split()
)
_WRITABLE = (dict, list, set, bytearray, deque)
_FORMAT_NAMES = frozenset({"format", "format_map"})
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


class PolicyViolation(ProgramStop):
    """A restricted program tried something the policy forbids."""

    def __init__(self, detail: str) -> None:
        super().__init__("policy", detail)


def apply_policy(tree: ast.Module) -> list[str]:
    """Rewrite ``tree`` in place with RestrictedPython's transformer; return its errors."""
    errors: list[str] = []
    warnings: list[str] = []
    used_names: dict[str, bool] = {}
    RestrictingNodeTransformer(errors, warnings, used_names).visit(tree)
    return errors


class ProgramClass(type):
    """Metaclass of every class a restricted program defines: their instances are
    writable (``self.x = 1``), nothing else's attributes are."""


def _check_value(value: Any, what: str) -> Any:
    if isinstance(value, ModuleType) and value.__name__ not in ALLOWED_MODULES:
        raise PolicyViolation(f"{what} is the module {value.__name__!r}, which is not allowed")
    return value


def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    """``getattr`` under the policy: no ``_`` names, no internals, no format strings."""
    if type(name) is not str:
        raise PolicyViolation("attribute names must be strings")
    if name.startswith("_") or name in INSPECT_ATTRIBUTES:
        raise PolicyViolation(f"access to attribute {name!r} is not allowed")
    if name in _FORMAT_NAMES and (
        isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))
    ):
        raise PolicyViolation(f"str.{name} is not allowed (use f-strings or %)")
    if obj is string and name == "Formatter":
        raise PolicyViolation("string.Formatter is not allowed")
    if isinstance(obj, string.Formatter) or (
        isinstance(obj, type) and issubclass(obj, string.Formatter)
    ):
        raise PolicyViolation("string.Formatter is not allowed")
    return _check_value(getattr(obj, name, *default), f"attribute {name!r}")


def _hasattr(obj: Any, name: str) -> bool:
    try:
        guarded_getattr(obj, name)
    except AttributeError:
        return False
    return True


def _getitem(obj: Any, key: Any) -> Any:
    return _check_value(obj[key], "the item")


def guarded_write(obj: Any) -> Any:
    """The target of an attribute or item write (or ``del``) if the policy allows it."""
    if isinstance(obj, _WRITABLE) or isinstance(type(obj), ProgramClass):
        return obj
    if isinstance(obj, ProgramClass):
        return obj
    raise PolicyViolation(f"writing to a {type(obj).__name__} object is not allowed")


def _setattr(obj: Any, name: str, value: Any) -> None:
    if type(name) is not str or name.startswith("_"):
        raise PolicyViolation(f"setting attribute {name!r} is not allowed")
    setattr(guarded_write(obj), name, value)


def _delattr(obj: Any, name: str) -> None:
    if type(name) is not str or name.startswith("_"):
        raise PolicyViolation(f"deleting attribute {name!r} is not allowed")
    delattr(guarded_write(obj), name)


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
    if name in _INTERNAL_IMPORTS and not fromlist:
        return __import__(name)
    if level != 0:
        raise PolicyViolation("relative imports are not allowed")
    if name not in ALLOWED_MODULES:
        allowed = " ".join(sorted(ALLOWED_MODULES))
        raise PolicyViolation(f"import of {name!r} is not allowed; allowed modules: {allowed}")
    module = __import__(name)
    for item in fromlist or ():
        if item == "*" or item.startswith("_"):
            raise PolicyViolation(f"'from {name} import {item}' is not allowed")
        _check_value(getattr(module, item, None), f"{name}.{item}")
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
        hasattr=_hasattr,
        setattr=_setattr,
        delattr=_delattr,
        __import__=_guarded_import,
    )
    printer = _SharedPrint(write)
    return {
        "__builtins__": table,
        "__name__": "program",
        "__metaclass__": ProgramClass,
        "_getattr_": guarded_getattr,
        "_getitem_": _getitem,
        "_getiter_": iter,
        "_write_": guarded_write,
        "_inplacevar_": _inplacevar,
        "_apply_": _apply,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_print_": lambda _getattr=None: printer,
        **names,
    }
