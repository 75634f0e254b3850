"""Lossless JSON materialisation and deep-frozen JSON containers.

Arguments, values, content and ``meta`` cross the pipeline as *frozen JSON*:
:class:`FrozenDict` / :class:`FrozenList` are read-only subclasses of ``dict`` / ``list``,
so ``isinstance(v, dict)``, ``json.dumps(v)`` and ``v == {...}`` keep working while every
mutating method raises ``TypeError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, SupportsIndex, TypeAlias, cast, overload

from ._errors import NotJSONError

JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
"""A JSON value, as ptc hands it out. Frozen JSON (:class:`FrozenDict`, :class:`FrozenList`)
is JSON too."""

JSONLike: TypeAlias = (
    Mapping[str, "JSONLike"] | Sequence["JSONLike"] | str | int | float | bool | None
)
"""What ptc accepts where JSON goes in (arguments, schemas, ``Deny(info=)``): covariant, so
``{"ids": ids}`` with ``ids: list[int]`` type-checks. The value is still checked at run time:
tuples, NaN and other non-JSON values are refused there (``INVALID_ARGS``, ``NotJSONError``)."""


def _readonly(self: object, *args: object, **kwargs: object) -> NoReturn:
    """Frozen JSON is read-only: this mutating method raises ``TypeError``."""
    raise TypeError(f"{type(self).__name__} is read-only")


class FrozenDict(dict[str, JSON]):
    """A ``dict`` that cannot be changed after construction (compares equal to plain dicts)."""

    __slots__ = ("_sealed",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if getattr(self, "_sealed", False):
            _readonly(self)
        dict.__init__(self, *args, **kwargs)
        object.__setattr__(self, "_sealed", True)

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __setattr__(self, name: str, value: object) -> NoReturn:
        _readonly(self)

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenDict'")

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Callable[..., FrozenDict], tuple[dict[str, JSON]]]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[JSON]):
    """A ``list`` that cannot be changed after construction (compares equal to plain lists)."""

    __slots__ = ("_sealed",)

    def __init__(self, *args: Any) -> None:
        if getattr(self, "_sealed", False):
            _readonly(self)
        list.__init__(self, *args)
        object.__setattr__(self, "_sealed", True)

    __setitem__ = _readonly
    __delitem__ = _readonly
    __iadd__ = _readonly
    __imul__ = _readonly
    append = _readonly
    extend = _readonly
    insert = _readonly
    pop = _readonly
    remove = _readonly
    clear = _readonly
    sort = _readonly
    reverse = _readonly

    def __setattr__(self, name: str, value: object) -> NoReturn:
        _readonly(self)

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenList'")

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[Callable[..., FrozenList], tuple[list[JSON]]]:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"

    def __mul__(self, n: SupportsIndex) -> list[JSON]:
        return list(self) * n


EMPTY = FrozenDict()

_SCALARS = (str, int, bool, type(None))


MAX_DEPTH = 200
"""How deeply JSON may nest (the worker's frames allow the same), so no value can exhaust
the interpreter's recursion limit anywhere it is handled."""


def freeze(value: object, path: str = "$", _depth: int = 0) -> JSON:
    """Return a deep-frozen lossless copy of ``value`` or raise :class:`NotJSONError`.

    Accepted: ``dict`` (string keys), ``list``, ``str``, ``int``, ``bool``, finite ``float``
    and ``None`` (subclasses of ``dict``/``list`` included; tuples, sets, bytes, enums and
    other objects are rejected so nothing is silently converted), nested at most
    :data:`MAX_DEPTH` levels. A container this function made is returned as it is (it is
    checked and immutable already) wherever it still fits within the depth: freezing a
    value built of frozen parts (a run's ``meta`` of 1,000 frozen log entries) costs one
    step per part, not a copy of every part.
    """
    if type(value) in _SCALARS:
        return cast(JSON, value)  # str, int, bool or None
    return _freeze(value, path, _depth)


_Where: TypeAlias = "str | tuple[_Where, str | int]"
"""Where a value sits: the path given to :func:`freeze`, or (parent, key or index). The
path's text (``$.a[0]``) is made only for an error: on every call's path, a string per
item would cost more than the freezing."""


def _path(where: _Where) -> str:
    keys: list[str] = []
    while isinstance(where, tuple):
        where, key = where
        keys.append(f".{key}" if isinstance(key, str) else f"[{key}]")
    return where + "".join(reversed(keys))


def _freeze(value: object, where: _Where, depth: int) -> JSON:
    """:func:`freeze` of a value that is not a str, int, bool or None (the callers take
    those as they are)."""
    kind = type(value)
    if kind is float:
        assert isinstance(value, float)
        if math.isfinite(value):
            return value
        raise NotJSONError(_path(where), f"{value!r} is not a JSON number")
    if kind is FrozenDict or kind is FrozenList:
        height = _height(value)
        if height and depth + height <= MAX_DEPTH:
            return cast(JSON, value)
    if depth >= MAX_DEPTH and isinstance(value, dict | list):
        raise NotJSONError(_path(where), f"nested deeper than {MAX_DEPTH} levels")
    deepest = 0
    if isinstance(value, dict):
        items: dict[str, JSON] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotJSONError(_path(where), f"object key {key!r} is not a string")
            if type(item) in _SCALARS:
                items[key] = item
                continue
            items[key] = frozen = _freeze(item, (where, key), depth + 1)
            height = _height(frozen)
            if height > deepest:
                deepest = height
        new_dict = _new_dict(FrozenDict)
        _dict_init(new_dict, items)
        made: FrozenDict | FrozenList = new_dict
    elif isinstance(value, list):
        elements: list[JSON] = []
        for i, item in enumerate(value):
            if type(item) in _SCALARS:
                elements.append(item)
                continue
            elements.append(frozen := _freeze(item, (where, i), depth + 1))
            height = _height(frozen)
            if height > deepest:
                deepest = height
        new_list = _new_list(FrozenList)
        _list_init(new_list, elements)
        made = new_list
    else:
        raise NotJSONError(_path(where), f"{kind.__name__} is not a JSON type")
    # Sealed with how deep it nests (an int, where one built by hand has ``True``); made
    # without FrozenDict's and FrozenList's ``__init__``, which only seal.
    object.__setattr__(made, "_sealed", deepest + 1)
    return made


_new_dict = dict.__new__
_dict_init = dict.__init__
_new_list = list.__new__
_list_init = list.__init__


def _height(value: object) -> int:
    """How deep a container :func:`freeze` made nests; 0 for anything else."""
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        mark = object.__getattribute__(value, "_sealed")
        if type(mark) is int:
            return mark
    return 0


def freeze_object(value: object, path: str = "$") -> FrozenDict:
    """:func:`freeze` for a value that must be a JSON object."""
    frozen = freeze(value, path)
    if not isinstance(frozen, FrozenDict):
        raise NotJSONError(path, f"{type(value).__name__} is not a JSON object")
    return frozen


@overload
def thaw(value: Mapping[str, object]) -> dict[str, JSON]: ...
@overload
def thaw(value: object) -> JSON: ...


def thaw(value: object) -> JSON:
    """A plain, mutable, independent deep copy of a (possibly frozen) JSON value: what a
    library that wants plain ``dict``/``list`` gets (tuples become lists)."""
    kind = type(value)
    if kind in _SCALARS or kind is float:
        return cast(JSON, value)
    if kind is FrozenDict or kind is dict:
        assert isinstance(value, dict)
        return {
            key if type(key) is str else str(key): item if type(item) in _SCALARS else thaw(item)
            for key, item in value.items()
        }
    if isinstance(value, Mapping):
        return {str(key): thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return cast(JSON, value)  # a JSON scalar by contract
