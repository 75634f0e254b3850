"""The restricted profile's classes: which dunders a program may name, the metaclass of
its classes, and the ``type`` it is given.

- :data:`SPECIAL_METHODS` a class body may define, :data:`READABLE_DUNDERS` a program may
  read on any object, :data:`WRITE_DUNDERS` it may read only bound to its own instances,
  :data:`BINDABLE_DUNDERS` it may bind as names;
- :class:`ProgramClass`, the metaclass of every class the program defines (their instances
  are writable), and :func:`program_class`, what its class statements call;
- :data:`RESTRICTED_TYPE`: ``type(x)`` and ``isinstance(c, type)`` as in CPython, while a
  real metaclass never reaches the program (:func:`no_metaclass`): called with three
  arguments, one would build a class whose namespace no policy saw.
"""

from __future__ import annotations

from typing import Any

from ._violations import PolicyViolation

_OPERATORS = "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and xor or".split()
SPECIAL_METHODS = frozenset(
    (
        "__init__ __repr__ __str__ __bytes__ __format__ __hash__ __bool__ __eq__ __ne__ "
        "__lt__ __le__ __gt__ __ge__ __len__ __length_hint__ __iter__ __next__ __reversed__ "
        "__contains__ __getitem__ __setitem__ __delitem__ __missing__ __call__ __enter__ "
        "__exit__ __aenter__ __aexit__ __aiter__ __anext__ __await__ __neg__ __pos__ __abs__ "
        "__invert__ __complex__ __int__ __float__ __index__ __round__ __trunc__ __floor__ "
        "__ceil__ __post_init__ __copy__ __deepcopy__ __get__ __set__ __delete__ __getattr__ "
        "__setattr__ __delattr__"
    ).split()
    + [f"__{p}{op}__" for op in _OPERATORS for p in ("", "r", "i")]
)
"""Special methods a program's class body may define."""
WRITE_DUNDERS = frozenset({"__setattr__", "__delattr__", "__setitem__", "__delitem__"})
"""Readable only bound to an instance of a program class (``super().__setattr__``)."""
READABLE_DUNDERS = frozenset(
    (
        "__name__ __qualname__ __doc__ __module__ __class__ __annotations__ __args__ "
        "__origin__ __dataclass_fields__ __getnewargs__"
    ).split()
) | (
    SPECIAL_METHODS
    - WRITE_DUNDERS
    - {"__getattr__", "__get__", "__set__", "__delete__"}  # lookups and writes by name
    - {"__await__", "__aiter__", "__anext__", "__aenter__", "__aexit__"}  # steppable
)
"""Dunder attributes a program may read on any object."""
BINDABLE_DUNDERS = SPECIAL_METHODS | {"__doc__", "__slots__"}
"""Dunder names a program may bind (``def __init__`` outside a class body, ``__hash__ =
None`` in one): none is a name the runtime looks up (``__builtins__``, ``__metaclass__``)."""


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


class ProgramClass(type):
    """Metaclass of every class a restricted program defines: their instances are
    writable (``self.x = 1``), nothing else's attributes are."""


_combined: dict[type, type] = {}


def program_class(name: str, bases: tuple[Any, ...], namespace: dict[str, Any], **kw: Any) -> Any:
    """The ``__metaclass__`` of every class statement of a restricted program.

    :class:`ProgramClass`, or, for a base whose own metaclass is a library's (a typing
    ``Protocol``: ``ABCMeta``), a subclass of both; ``typing.NamedTuple`` and
    ``TypedDict`` bases, whose metaclasses build a class of their own, get theirs."""
    meta: type = ProgramClass
    for base in bases:
        other = type(base)
        if issubclass(meta, other):
            continue
        if not issubclass(other, meta) and meta is not ProgramClass:
            raise TypeError(f"metaclass conflict between {meta.__name__} and {other.__name__}")
        meta = other
    if meta is not ProgramClass and not issubclass(meta, ProgramClass):
        if getattr(meta, "__module__", "") == "typing" and meta.__name__ in _TYPING_FACTORIES:
            return meta(name, bases, namespace, **kw)  # type: ignore[call-arg]
        if meta not in _combined:
            _combined[meta] = type(f"Program{meta.__name__}", (ProgramClass, meta), {})
        meta = _combined[meta]
    return meta(name, bases, namespace, **kw)


_TYPING_FACTORIES = frozenset({"NamedTupleMeta", "_TypedDictMeta"})


class _TypeMeta(type):
    """Makes :class:`_Type` behave as ``type`` for ``type(x)``, ``isinstance(c, type)``
    and ``issubclass``; ``type(name, bases, dict)`` builds a program class, its
    namespace held to what a class statement may bind."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if kwargs and len(args) != 3:
            raise TypeError("type() takes no keyword arguments")
        if len(args) == 1:
            return no_metaclass(type(args[0]))
        if len(args) == 3:
            name, bases, namespace = args
            if not isinstance(bases, tuple):
                raise TypeError(
                    f"type.__new__() argument 2 must be tuple, not {type(bases).__name__}"
                )
            return program_class(name, bases, _class_namespace(namespace), **kwargs)
        raise TypeError("type() takes 1 or 3 arguments")

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return sub is cls or issubclass(sub, type)

    def __repr__(cls) -> str:
        return "<class 'type'>"


def _class_namespace(namespace: Any) -> dict[str, Any]:
    """The namespace of ``type(name, bases, namespace)``, held to what a class statement
    may bind (no ``__getattribute__``, ``__del__``, ``__init_subclass__``, ...)."""
    if not isinstance(namespace, dict):
        raise TypeError(f"type.__new__() argument 3 must be dict, not {type(namespace).__name__}")
    for key in namespace:
        if not isinstance(key, str) or (is_dunder(key) and key not in BINDABLE_DUNDERS):
            raise PolicyViolation(
                f"a class namespace may not bind {key!r} in the restricted profile"
            )
    return dict(namespace)


class _Type(metaclass=_TypeMeta):
    """``type`` for restricted programs (see :class:`_TypeMeta`)."""


_Type.__name__ = _Type.__qualname__ = "type"
_Type.__module__ = "builtins"
RESTRICTED_TYPE: type = _Type
"""The ``type`` of a restricted program's builtins."""


def no_metaclass(value: Any) -> Any:
    """``value``, or :data:`RESTRICTED_TYPE` for a metaclass (``type``, ``ABCMeta``, the
    program's own): called with three arguments, a real one would build a class whose
    namespace no policy saw (``__reduce_ex__`` for ``copy``, ``__del__``, ...)."""
    if isinstance(value, type) and issubclass(value, type):
        return RESTRICTED_TYPE
    return value
