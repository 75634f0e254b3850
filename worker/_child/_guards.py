"""The restricted profile's run-time guards: attribute reads, item reads, writes.

Every attribute a restricted program reads goes through :func:`guarded_getattr`, every
item through :func:`guarded_getitem`, every write target through :func:`guarded_write`.
They refuse:

- names that are not plain ``str`` or that start with ``_``; frame, code and generator
  internals (RestrictedPython's ``INSPECT_ATTRIBUTES``: ``gi_frame``, ``f_back``, ...);
- ``format``/``format_map`` on ``str`` and its subclasses, and ``string.Formatter``
  (format strings walk attributes inside C, where no guard sees them);
- attributes a class gets from its metaclass (``int.mro()`` reaches ``object``,
  ``ABCMeta.register`` rewires ``isinstance``);
- ``AttributeError.obj`` (it hands over whatever object a library's lookup failed on);
- values that are modules other than the vetted ones (``_stdlib``), frames, code
  objects or tracebacks, and any attribute of a module that is not vetted;
- writes into anything but ``dict list set bytearray deque`` (and subclasses),
  ``decimal.Context`` and instances of classes the program defined.

A refusal raises :class:`PolicyViolation`, which also records itself with the run (see
:func:`recording_violations`): the run ends as ``policy`` even if the program catches it.
"""

from __future__ import annotations

import decimal
import string
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import CodeType, FrameType, ModuleType, TracebackType
from typing import Any

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from ._outcome import ProgramStop

_WRITABLE = (dict, list, set, bytearray, deque, decimal.Context)
_FORMAT_NAMES = frozenset({"format", "format_map"})
_INTERNALS = (FrameType, CodeType, TracebackType)

_record: ContextVar[list[PolicyViolation] | None] = ContextVar("ptc_violations", default=None)


class PolicyViolation(ProgramStop):
    """A restricted program tried something the policy forbids.

    Created only by a guard; it records itself with the run being recorded (if any), so
    the run ends as ``policy`` even when the program catches it."""

    def __init__(self, detail: str) -> None:
        super().__init__("policy", detail)
        record = _record.get()
        if record is not None:
            record.append(self)


@contextmanager
def recording_violations() -> Iterator[list[PolicyViolation]]:
    """Collect every :class:`PolicyViolation` raised in this context (one program run)."""
    record: list[PolicyViolation] = []
    token = _record.set(record)
    try:
        yield record
    finally:
        _record.reset(token)


class ProgramClass(type):
    """Metaclass of every class a restricted program defines: their instances are
    writable (``self.x = 1``), nothing else's attributes are."""


class VettedModule(ModuleType):
    """An allowed module as a program sees it: only the attributes ``_stdlib`` vetted.

    Holds no reference to the real module. A name the real module has but the profile
    leaves out is a violation (with a clear message), any other missing name an
    ``AttributeError``."""

    def __init__(self, name: str, attributes: dict[str, Any], dropped: frozenset[str]) -> None:
        super().__init__(name)
        self.__dict__.update(attributes)
        _DROPPED[name] = dropped  # kept out of the module's namespace

    def __getattr__(self, name: str) -> Any:
        if name in _DROPPED.get(self.__name__, ()):
            raise PolicyViolation(
                f"{self.__name__}.{name} is not available in the restricted profile"
            )
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


_DROPPED: dict[str, frozenset[str]] = {}
"""Per vetted module: the public names of the real module that the profile leaves out."""


def check_value(value: Any, what: str) -> Any:
    """``value`` if a program may hold it: no foreign module, frame, code or traceback."""
    if isinstance(value, ModuleType) and not isinstance(value, VettedModule):
        raise PolicyViolation(f"{what} is the module {value.__name__!r}, which is not allowed")
    if isinstance(value, _INTERNALS):
        raise PolicyViolation(f"{what} is a {type(value).__name__} object, which is not allowed")
    return value


def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    """``getattr`` under the policy (``obj.name`` compiles to a call of this, too)."""
    if type(name) is not str:
        raise PolicyViolation("attribute names must be strings")
    if name.startswith("_") or name in INSPECT_ATTRIBUTES:
        raise PolicyViolation(f"access to attribute {name!r} is not allowed")
    if isinstance(obj, ModuleType) and not isinstance(obj, VettedModule):
        raise PolicyViolation(f"access to the module {obj.__name__!r} is not allowed")
    if name in _FORMAT_NAMES and _is_str(obj):
        raise PolicyViolation(f"str.{name} is not allowed (use f-strings or %)")
    if (
        isinstance(obj, string.Formatter)
        or obj is string.Formatter
        or _is_subclass(obj, string.Formatter)
    ):
        raise PolicyViolation("string.Formatter is not allowed")
    if isinstance(obj, type) and _from_metaclass(obj, name):
        raise PolicyViolation(f"{obj.__name__}.{name} (from its metaclass) is not allowed")
    if name == "obj" and isinstance(obj, AttributeError):
        raise PolicyViolation("AttributeError.obj is not allowed")
    return check_value(getattr(obj, name, *default), f"attribute {name!r}")


def guarded_hasattr(obj: Any, name: str) -> bool:
    try:
        guarded_getattr(obj, name)
    except AttributeError:
        return False
    return True


def guarded_getitem(obj: Any, key: Any) -> Any:
    return check_value(obj[key], "the item")


def guarded_write(obj: Any) -> Any:
    """The target of an attribute or item write (or ``del``) if the policy allows it."""
    if isinstance(obj, _WRITABLE) or isinstance(type(obj), ProgramClass):
        return obj
    if isinstance(obj, ProgramClass):
        return obj
    raise PolicyViolation(f"writing to a {type(obj).__name__} object is not allowed")


def guarded_setattr(obj: Any, name: str, value: Any) -> None:
    if type(name) is not str or name.startswith("_"):
        raise PolicyViolation(f"setting attribute {name!r} is not allowed")
    setattr(guarded_write(obj), name, value)


def guarded_delattr(obj: Any, name: str) -> None:
    if type(name) is not str or name.startswith("_"):
        raise PolicyViolation(f"deleting attribute {name!r} is not allowed")
    delattr(guarded_write(obj), name)


def _is_str(obj: Any) -> bool:
    return isinstance(obj, str) or _is_subclass(obj, str)


def _is_subclass(obj: Any, cls: type) -> bool:
    return isinstance(obj, type) and issubclass(obj, cls)


def _from_metaclass(cls: type, name: str) -> bool:
    """True when ``cls.name`` would come from the metaclass, not from ``cls``'s own MRO."""
    meta: type = type(cls)
    if any(name in vars(klass) for klass in cls.__mro__):
        return False
    return any(name in vars(klass) for klass in meta.__mro__)
