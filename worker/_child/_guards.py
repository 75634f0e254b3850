"""The restricted profile's run-time guards: attribute reads, item reads, writes.

Every attribute a restricted program reads goes through :func:`guarded_getattr`, every
item through :func:`guarded_getitem`, every write target through :func:`guarded_write`
(private attributes: :func:`guarded_write_private`). They refuse:

- names that are not plain ``str``; frame, code and generator internals
  (RestrictedPython's ``INSPECT_ATTRIBUTES``: ``gi_frame``, ``f_back``, ...);
- dunders other than :data:`READABLE_DUNDERS` (``__name__``, ``__class__``, ``__doc__``,
  the special methods a class may define except the attribute-protocol and async ones);
  ``__setattr__``/``__setitem__`` and friends only bound to an instance of a program
  class (an unbound ``object.__setattr__`` writes into anything);
- private names (``_x``) except on the program's own objects (an instance or class of a
  program class, for a name no library base class defines) and namedtuples' ``_asdict
  _replace _make _fields _field_defaults``;
- ``string.Formatter`` (format strings walk attributes inside C, where no guard sees
  them); ``str.format``/``format_map`` templates that walk (``{0.name}``) are formatted
  through the guards;
- attributes a class gets from its metaclass (``int.mro()`` reaches ``object``,
  ``ABCMeta.register`` rewires ``isinstance``);
- ``AttributeError.obj`` (it hands over whatever object a library's lookup failed on);
- ``send``/``throw``/``asend``/``athrow`` of coroutines and other awaitables (stepping one
  by hand hands out the event loop's futures), and every attribute of an event loop,
  future, task or handle;
- values that are modules other than the vetted ones (``_stdlib``), frames, code
  objects, tracebacks or event-loop objects, and any attribute of a module that is not
  vetted;
- writes into anything but ``dict list set bytearray deque`` (and subclasses),
  ``decimal.Context`` (and its flags) and instances and classes of the program's classes
  (builtin immutable values are let through: they refuse the write themselves).

A refusal raises :class:`PolicyViolation`, which also records itself with the run (see
:func:`recording_violations`): the run ends as ``policy`` even if the program catches it.
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]  # CPython's format-string parser
import asyncio
import decimal
import string
from collections import deque
from collections.abc import AsyncGenerator, Awaitable
from types import CodeType, FrameType, ModuleType, TracebackType
from typing import Any

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from ._classes import (
    READABLE_DUNDERS,
    WRITE_DUNDERS,
    ProgramClass,
    is_dunder,
    no_metaclass,
)
from ._violations import PolicyViolation

_WRITABLE = (dict, list, set, bytearray, deque, decimal.Context, type(decimal.Context().flags))
# Builtin values that refuse every write themselves: CPython's own error is the answer.
_IMMUTABLE = frozenset({tuple, str, bytes, int, float, complex, bool, frozenset, range, type(None)})
_FORMAT_NAMES = frozenset({"format", "format_map"})
_LOOP_OBJECTS = (asyncio.AbstractEventLoop, asyncio.Future, asyncio.Handle)
_INTERNALS = (FrameType, CodeType, TracebackType, *_LOOP_OBJECTS)
_STEPPING = frozenset({"send", "throw", "asend", "athrow"})
_NAMEDTUPLE_NAMES = frozenset({"_asdict", "_replace", "_make", "_fields", "_field_defaults"})


class VettedModule(ModuleType):
    """An allowed module as a program sees it: only the attributes ``_stdlib`` vetted.

    Holds no reference to the real module. A name the real module has but the profile
    leaves out is a violation (with a clear message), any other missing name an
    ``AttributeError``."""

    def __init__(self, name: str, attributes: dict[str, Any], dropped: frozenset[str]) -> None:
        super().__init__(name)
        self.__dict__.update(attributes)
        _DROPPED[name] = dropped  # kept out of the module's namespace

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("cannot pickle 'module' object")

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


def guarded_getattr(*args: Any, **kwargs: Any) -> Any:
    """``getattr`` under the policy (``obj.name`` compiles to a call of this, too)."""
    if kwargs:
        raise TypeError("getattr() takes no keyword arguments")
    if len(args) < 2:
        raise TypeError(f"getattr expected at least 2 arguments, got {len(args)}")
    if len(args) > 3:
        raise TypeError(f"getattr expected at most 3 arguments, got {len(args)}")
    obj, name, *default = args
    if type(name) is not str:
        if isinstance(name, str):
            raise PolicyViolation("attribute names must be plain strings")
        raise TypeError(f"attribute name must be string, not '{type(name).__name__}'")
    _check_name(obj, name)
    if isinstance(obj, ModuleType) and not isinstance(obj, VettedModule):
        raise PolicyViolation(f"access to the module {obj.__name__!r} is not allowed")
    if isinstance(obj, _LOOP_OBJECTS):
        raise PolicyViolation(f"access to a {type(obj).__name__} object is not allowed")
    if name in _STEPPING and isinstance(obj, Awaitable | AsyncGenerator):
        raise PolicyViolation(
            f"{name}() of a coroutine is not allowed: await it (or asyncio.gather several)"
        )
    if name in _FORMAT_NAMES and _is_str(obj):
        return safe_format(obj, name)
    if (
        isinstance(obj, string.Formatter)
        or obj is string.Formatter
        or _is_subclass(obj, string.Formatter)
    ):
        raise PolicyViolation("string.Formatter is not allowed")
    if isinstance(obj, type) and name not in READABLE_DUNDERS and _from_metaclass(obj, name):
        raise PolicyViolation(f"{obj.__name__}.{name} (from its metaclass) is not allowed")
    if name == "obj" and isinstance(obj, AttributeError):
        raise PolicyViolation("AttributeError.obj is not allowed")
    value = getattr(obj, name, *default)
    if name in WRITE_DUNDERS and isinstance(obj, type):
        return _on_program_instances(value, name)
    return no_metaclass(check_value(value, f"attribute {name!r}"))


guarded_getattr.__qualname__ = guarded_getattr.__name__ = "getattr"


def _check_name(obj: Any, name: str) -> None:
    """Refuse a name the program may not read on ``obj`` (see the module docstring)."""
    if name in INSPECT_ATTRIBUTES:
        raise PolicyViolation(f"access to attribute {name!r} is not allowed")
    if not name.startswith("_") or name == "_":
        return
    if is_dunder(name):
        if name in READABLE_DUNDERS:
            return
        if name in WRITE_DUNDERS and (_program_instance(_bound(obj)) or isinstance(obj, type)):
            return  # an unbound one is wrapped (_on_program_instances)
    elif name in _NAMEDTUPLE_NAMES and _is_namedtuple(obj):
        return
    elif not name.startswith("__") and _program_owns(obj, name):
        return
    raise PolicyViolation(f"access to attribute {name!r} is not allowed")


def _bound(obj: Any) -> Any:
    """What ``super()`` is bound to, or ``obj`` itself."""
    return obj.__self__ if isinstance(obj, super) else obj  # type: ignore[attr-defined]


def _program_instance(obj: Any) -> bool:
    return isinstance(type(obj), ProgramClass)


def _program_owns(obj: Any, name: str) -> bool:
    """``obj`` is a program's object or class and no library class it derives from
    defines ``name`` (a private name of a library base is the library's internals)."""
    target = _bound(obj)
    cls = target if isinstance(target, ProgramClass) else type(target)
    if not isinstance(cls, ProgramClass):
        return False
    return not any(name in vars(k) for k in cls.__mro__ if not isinstance(k, ProgramClass))


def _is_namedtuple(obj: Any) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, tuple) and any(
        isinstance(vars(k).get("_fields"), tuple) for k in cls.__mro__
    )


def guarded_hasattr(*args: Any, **kwargs: Any) -> bool:
    if kwargs:
        raise TypeError("hasattr() takes no keyword arguments")
    if len(args) != 2:
        raise TypeError(f"hasattr expected 2 arguments, got {len(args)}")
    try:
        guarded_getattr(*args)
    except AttributeError:
        return False
    return True


guarded_hasattr.__qualname__ = guarded_hasattr.__name__ = "hasattr"


def guarded_getitem(obj: Any, key: Any) -> Any:
    return no_metaclass(check_value(obj[key], "the item"))


def guarded_write(obj: Any) -> Any:
    """The target of an attribute or item write (or ``del``) if the policy allows it."""
    if isinstance(obj, _WRITABLE) or isinstance(type(obj), ProgramClass):
        return obj
    if isinstance(obj, ProgramClass) or type(obj) in _IMMUTABLE:
        return obj
    raise PolicyViolation(f"writing to a {type(obj).__name__} object is not allowed")


def _on_program_instances(method: Any, name: str) -> Any:
    """``Cls.__setattr__`` and friends, unbound: usable on the program's instances only
    (``object.__setattr__(self, "x", 1)``), with the attribute names a write may use."""

    def bound_check(target: Any, *args: Any) -> Any:
        if not _program_instance(target):
            raise PolicyViolation(f"{name} of a {type(target).__name__} object is not allowed")
        if name in ("__setattr__", "__delattr__") and args:
            _check_write_name(target, args[0], "setting" if name == "__setattr__" else "deleting")
        return method(target, *args)

    bound_check.__name__ = bound_check.__qualname__ = name
    return bound_check


def guarded_write_special(obj: Any) -> Any:
    """The target of a special-method write (``cls.__init__ = init``): program classes and
    their instances only."""
    if _program_instance(obj) or isinstance(obj, ProgramClass):
        return obj
    raise PolicyViolation(
        f"setting a special method of a {type(obj).__name__} object is not allowed"
    )


def guarded_write_private(obj: Any) -> Any:
    """The target of a write of a ``_x`` attribute: the program's own objects only."""
    if _program_instance(obj) or isinstance(obj, ProgramClass):
        return obj
    raise PolicyViolation(
        f"writing a private attribute of a {type(obj).__name__} object is not allowed"
    )


def _check_write_name(obj: Any, name: object, verb: str) -> str:
    if type(name) is not str:
        raise TypeError(f"attribute name must be string, not '{type(name).__name__}'")
    if name in INSPECT_ATTRIBUTES or is_dunder(name):
        raise PolicyViolation(f"{verb} attribute {name!r} is not allowed")
    if name.startswith("_") and name != "_":
        guarded_write_private(obj)
    return name


def guarded_setattr(*args: Any, **kwargs: Any) -> None:
    if kwargs:
        raise TypeError("setattr() takes no keyword arguments")
    if len(args) != 3:
        raise TypeError(f"setattr expected 3 arguments, got {len(args)}")
    obj, name, value = args
    setattr(guarded_write(obj), _check_write_name(obj, name, "setting"), value)


def guarded_delattr(*args: Any, **kwargs: Any) -> None:
    if kwargs:
        raise TypeError("delattr() takes no keyword arguments")
    if len(args) != 2:
        raise TypeError(f"delattr expected 2 arguments, got {len(args)}")
    obj, name = args
    delattr(guarded_write(obj), _check_write_name(obj, name, "deleting"))


guarded_setattr.__qualname__ = guarded_setattr.__name__ = "setattr"
guarded_delattr.__qualname__ = guarded_delattr.__name__ = "delattr"


class _GuardedFormatter(string.Formatter):
    """``str.format`` for templates that name attributes or items: each step of a field
    (``{0.name[1]}``) goes through the guards, as the same expression in code would."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attribute, key in rest:
            obj = guarded_getattr(obj, key) if is_attribute else guarded_getitem(obj, key)
        return obj, first


def safe_format(obj: Any, name: str) -> Any:
    """``str.format``/``format_map``: CPython's own, unless a replacement field walks
    attributes or items (``{0.__class__}``, which C code would do out of the guards'
    sight): then :class:`_GuardedFormatter`."""
    method = getattr(obj, name)

    def checked(*args: Any, **kwargs: Any) -> Any:
        bound = isinstance(obj, str)
        template = obj if bound else (args[0] if args else None)
        if not isinstance(template, str) or not _walks(template):
            return method(*args, **kwargs)
        rest = args if bound else args[1:]
        if name == "format_map":
            if len(rest) != 1 or kwargs:
                return method(*args, **kwargs)  # CPython's own argument errors
            return _GuardedFormatter().vformat(template, (), rest[0])
        return _GuardedFormatter().vformat(template, rest, kwargs)

    checked.__name__ = checked.__qualname__ = name
    return checked


def _walks(template: str, depth: int = 0) -> bool:
    """Whether a replacement field of ``template`` (or of a nested spec) has an attribute
    or index part. A malformed template does not: CPython's format reports it."""
    try:
        for _literal, field, spec, _conversion in _string.formatter_parser(template):
            if field and next(iter(_string.formatter_field_name_split(field)[1]), None):
                return True
            if spec and depth < 3 and _walks(spec, depth + 1):
                return True
    except ValueError:
        return False
    return False


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
