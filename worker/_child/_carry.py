"""What a session carries from one run to the next, decided without serializing anything.

A session keeps a program's globals: every name the program bound at module level except
dunder names and the SDK's own (``tools``, ``parallel``, ``catalog``, ``ToolCallError``,
rebound to each run's SDK); in the ``restricted`` profile also no ``_`` name (its guards).
Some values cannot outlive their process (a generator's paused frame, a lock, an open
file, a thread, a socket): :func:`why_not_carried` names them with the reason the model
reads. The ``restricted`` profile carries data only (:func:`data_only_problem`).

Pure functions over the program's objects, standard library only: the child's
serializer (``_session``) and the in-process fake backend both use them, and importing
this module imports no deserializer.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import io
import socket
import threading
import types
from collections.abc import Iterable, Mapping
from typing import Any

SDK_NAMES = ("tools", "parallel", "catalog", "ToolCallError")
"""The SDK's globals: never carried, rebound to each run's SDK."""
MAX_REASON_CHARS = 300
"""Longest reason given for a dropped name."""

_LOCK_TYPES: tuple[type, ...] = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
    threading.Event,
)
_DROPPED_KINDS: tuple[tuple[tuple[type, ...], str], ...] = (
    (
        (types.GeneratorType, types.AsyncGeneratorType),
        "a generator: its paused frame exists only in the run that made it; keep what it "
        "yields (e.g. a list) instead",
    ),
    (
        (types.CoroutineType,),
        "a coroutine: it runs only in the run that made it; await it, or keep its result",
    ),
    ((io.IOBase,), "an open file: reopen it by its path in the next run (files persist)"),
    (_LOCK_TYPES, "a lock or other synchronisation object: make a new one in each run"),
    ((threading.Thread,), "a thread: it ends with its run"),
    ((socket.socket,), "a socket: it ends with its run"),
    ((types.FrameType, types.TracebackType), "a frame or traceback of a finished run"),
)

DATA_TYPES: frozenset[type] = frozenset(
    {type(None), bool, int, float, complex, str, bytes, bytearray}
    | {list, tuple, dict, set, frozenset}
)
"""Plain data: what the ``restricted`` profile carries, nested at will."""
VALUE_CLASSES: frozenset[type] = frozenset(
    {
        datetime.date,
        datetime.datetime,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
        decimal.Decimal,
        fractions.Fraction,
        collections.OrderedDict,
        collections.Counter,
        collections.deque,
    }
)
"""Plain values the ``restricted`` profile's modules return, carried like data (their
pickles name only these classes, which the restricted loader allows and nothing else)."""
_CONTAINERS = (list, tuple, set, frozenset, collections.deque)


def is_carried_name(name: str, profile: str) -> bool:
    """Whether a global of that name is the program's to carry (see the module docstring)."""
    if type(name) is not str or name in SDK_NAMES:
        return False
    if name.startswith("__") and name.endswith("__"):
        return False
    return not (profile == "restricted" and name.startswith("_"))


def carried_names(env: Mapping[str, Any], profile: str) -> list[str]:
    """The program's globals in ``env``, in their order of definition."""
    return [name for name in env if is_carried_name(name, profile)]


def why_not_carried(value: object) -> str | None:
    """Why ``value`` can never be carried (a kind that lives only in its run), or ``None``."""
    for kinds, reason in _DROPPED_KINDS:
        if isinstance(value, kinds):
            return reason
    return None


def data_only_problem(value: object, *, max_items: int = 10_000_000) -> str | None:
    """Why ``value`` is not plain data for the ``restricted`` profile, or ``None``.

    Walks containers iteratively (cycles and shared parts are visited once); anything
    but :data:`DATA_TYPES` and :data:`VALUE_CLASSES`, exact types only, is refused."""
    seen: set[int] = set()
    todo: list[object] = [value]
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind not in DATA_TYPES and kind not in VALUE_CLASSES:
            return f"the restricted profile carries data only, not {_kind(item)}"
        if kind in (dict, collections.OrderedDict, collections.Counter):
            assert isinstance(item, dict)
            if id(item) not in seen:
                seen.add(id(item))
                todo.extend(item.keys())
                todo.extend(item.values())
        elif isinstance(item, _CONTAINERS) and id(item) not in seen:
            seen.add(id(item))
            todo.extend(item)
        if len(seen) > max_items:
            return "the value is too large to check"
    return None


def module_name(value: object) -> str | None:
    """The importable name of a module (``import math as m`` carries ``m`` as ``math``)."""
    if isinstance(value, types.ModuleType):
        name = getattr(value, "__name__", None)
        return name if type(name) is str else None
    return None


def _kind(value: object) -> str:
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        return "a function"
    if isinstance(value, type):
        return "a class"
    name = type(value).__name__
    return f"a {name} object"


def cap_reason(text: str) -> str:
    """A reason cut to :data:`MAX_REASON_CHARS`, on one line."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 3] + "..."


def largest(sizes: Iterable[tuple[str, int]], count: int = 5) -> str:
    """The ``count`` largest ``(name, bytes)`` as ``name (1.2 MiB), ...``."""
    ranked = sorted(sizes, key=lambda item: -item[1])[:count]
    return ", ".join(f"{name} ({mib(size)})" for name, size in ranked)


def mib(size: int) -> str:
    """``size`` bytes for a person: ``812 KiB``, ``1.5 MiB``."""
    if size < 1024 * 1024:
        return f"{max(1, round(size / 1024))} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
