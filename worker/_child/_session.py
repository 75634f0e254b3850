"""A session's state inside the child: saved to opaque bytes after a run, restored before
the next one. The only module of ``ptc``, ``sdkgen`` and ``worker`` that deserializes
objects; it runs only in a contained child (the host never imports it: a layering test).

**What is saved** (see ``_carry`` for which names): the program's globals in two groups,
pickled separately. Plain values the C pickler takes as they are (data, ``datetime``,
``Decimal``, ...) are pickled at C speed; the rest (the program's functions, lambdas,
closures, classes and their instances, SDK references) by ``cloudpickle``, by value.
Modules are carried by name and imported again. What cannot be carried is dropped, each
name with its reason. In the ``restricted`` profile only data is carried (``_carry``),
and its loader refuses every class but a few plain value classes.

**global keeps working.** ``cloudpickle`` gives the functions it restores a fresh globals
dict (one per module they came from, shared by all of them). The saved state starts with
an *anchor*, a function whose globals are the run's namespace, so that dict is the one
the anchor gets back; the next program runs in that very dict, so ``global x`` in a
carried function and ``x = ...`` in the program reach the same ``x``.

**References.** Objects that belong to the run rather than the state are pickled as
references, resolved again when the state is restored: the namespace itself, the SDK's
objects (``tools``, ``tools.get_weather``, ``ToolCallError``: rebound to the new run's
SDK), values of the plain group that a function or object also holds (identity kept),
and dropped values (a carried function that used one gets ``NameError`` for it).

**Files** under the working directory (the scratch dir) are saved with the globals, as
``(path, mode, bytes)``, and written back before the next program runs; symbolic links
are dropped. The whole blob is bounded by ``Limits.session_mib``.

The blob: ``MAGIC`` + a ``marshal`` of ``(format, profile, plain, objects, modules,
files)`` (containers and bytes this module built, never a program's object).
"""

from __future__ import annotations

import importlib
import io
import marshal
import os
import pickle
import stat
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from ._carry import (
    VALUE_CLASSES,
    cap_reason,
    carried_names,
    data_only_problem,
    largest,
    mib,
    module_name,
    why_not_carried,
)

MAGIC = b"ptc-session\x00"
FORMAT = 1
_PROTOCOL = 5
_FUNCTION_KINDS = (
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    type,
)
_IMMUTABLE = frozenset({type(None), bool, int, float, complex, str, bytes, tuple, frozenset})
_ALLOWED_CLASSES = {(c.__module__, c.__qualname__): c for c in VALUE_CLASSES} | {
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
}
_DROPPED = object()


class RestoreError(Exception):
    """The saved state could not be restored (the run fails before its program starts)."""


@dataclass
class Saved:
    """A run's state as the host gets it: the blob (``None``: nothing saved, ``problem``
    says why), the carried names and the dropped ones with their reasons."""

    blob: bytes | None
    names: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    problem: str = ""


# --- saving ---------------------------------------------------------------------------


def save(
    env: dict[str, Any],
    *,
    profile: str,
    sdk: Mapping[str, Any],
    files_root: str | None,
    max_bytes: int,
) -> Saved:
    """The state of ``env`` (a finished program's globals) and of ``files_root``."""
    dropped: list[tuple[str, str]] = []
    modules: dict[str, str] = {}
    plain: dict[str, Any] = {}
    objects: dict[str, Any] = {}
    for name in carried_names(env, profile):
        value = env[name]
        reason = why_not_carried(value)
        module = module_name(value)
        if reason is None and module is not None:
            modules[name] = module
            continue
        if reason is None and profile == "restricted":
            reason = data_only_problem(value)
        if reason is not None:
            dropped.append((name, reason))
        elif isinstance(value, _FUNCTION_KINDS):
            objects[name] = value
        else:
            plain[name] = value
    plain_bytes = _dump_plain(plain, objects, dropped, profile)
    refs = _References(env, sdk, plain, dropped)
    object_bytes = _dump_objects(objects, refs, dropped) if objects else b""
    files, file_sizes = _pack_files(files_root, dropped)
    blob = MAGIC + marshal.dumps((FORMAT, profile, plain_bytes, object_bytes, modules, files))
    kept = {*plain, *objects, *modules}
    names = [name for name in carried_names(env, profile) if name in kept]
    if len(blob) > max_bytes:
        sizes = [(n, _size(pickle.dumps, v)) for n, v in plain.items()]
        sizes += [(n, _size(cloudpickle.dumps, v)) for n, v in objects.items()]
        sizes += file_sizes
        problem = (
            f"the session's state is {mib(len(blob))}, over Limits.session_mib "
            f"({mib(max_bytes)}); the largest: {largest(sizes)}. Delete what the next "
            "step does not need (del name, os.remove(path)) or keep it smaller"
        )
        return Saved(None, names, dropped, problem)
    return Saved(blob, names, dropped)


def _size(dumps: Any, value: object) -> int:
    """How large ``value`` is alone (0 when it pickles only with the others)."""
    try:
        return len(dumps(value, _PROTOCOL))
    except Exception:  # noqa: BLE001 - the program's object; only a size for the message
        return 0


def _dump_plain(
    plain: dict[str, Any], objects: dict[str, Any], dropped: list[tuple[str, str]], profile: str
) -> bytes:
    """The plain group, at C speed; a name the plain pickler refuses moves to the objects
    (python profile) or is dropped (restricted)."""
    try:
        return pickle.dumps(plain, _PROTOCOL)
    except Exception:  # noqa: BLE001 - find the names it refuses, one by one
        pass
    for name, value in list(plain.items()):
        try:
            pickle.dumps(value, _PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - the program's object may raise anything
            del plain[name]
            if profile == "restricted":
                dropped.append((name, cap_reason(f"cannot be carried: {exc}")))
            else:
                objects[name] = value
    return pickle.dumps(plain, _PROTOCOL)


class _References:
    """What the objects group pickles as references (see the module docstring)."""

    def __init__(
        self,
        env: dict[str, Any],
        sdk: Mapping[str, Any],
        plain: Mapping[str, Any],
        dropped: list[tuple[str, str]],
    ) -> None:
        self.ids: dict[int, tuple[str, ...]] = {id(env): ("env",)}
        for name, value in sdk.items():
            self.ids.setdefault(id(value), ("sdk", name))
        tools = sdk.get("tools")
        for attr, value in (vars(tools) if isinstance(tools, type) else {}).items():
            if not attr.startswith("_"):
                self.ids.setdefault(id(value), ("sdk", "tools", attr))
        for name, value in plain.items():
            if type(value) not in _IMMUTABLE:
                self.ids[id(value)] = ("plain", name)
        self.dropped = dropped
        self.env = env

    def mark_dropped(self, name: str) -> None:
        self.ids[id(self.env[name])] = ("dropped", name)


class _ObjectPickler(cloudpickle.Pickler):  # type: ignore[misc]
    def __init__(self, file: io.BytesIO, refs: _References) -> None:
        super().__init__(file, protocol=_PROTOCOL)
        self._refs = refs

    def persistent_id(self, obj: Any) -> Any:
        return self._refs.ids.get(id(obj))


def _dump_objects(
    objects: dict[str, Any], refs: _References, dropped: list[tuple[str, str]]
) -> bytes:
    """The anchor, then the objects group, by one pickler (one memo: shared parts and the
    functions' one globals dict stay shared)."""
    for name, _ in dropped:
        refs.mark_dropped(name)
    anchor = types.FunctionType(compile("None", "<session>", "eval"), refs.env)
    while True:
        buffer = io.BytesIO()
        pickler = _ObjectPickler(buffer, refs)
        try:
            pickler.dump(anchor)
            pickler.dump(objects)
            return buffer.getvalue()
        except Exception:  # noqa: BLE001 - find the names it refuses, then again without
            pass
        bad = _refused(objects, refs)
        for name, reason in bad:
            del objects[name]
            dropped.append((name, reason))
            refs.mark_dropped(name)
        if not bad:  # only together (a cycle through a refused part): drop them all
            dropped.extend((name, "cannot be carried with the others") for name in objects)
            objects.clear()


def _refused(objects: dict[str, Any], refs: _References) -> list[tuple[str, str]]:
    bad: list[tuple[str, str]] = []
    for name, value in objects.items():
        try:
            _ObjectPickler(io.BytesIO(), refs).dump(value)
        except RecursionError:
            bad.append((name, "nested too deeply to be carried"))
        except Exception as exc:  # noqa: BLE001 - the program's object may raise anything
            bad.append((name, cap_reason(f"cannot be carried: {exc}")))
    return bad


def _pack_files(
    root: str | None, dropped: list[tuple[str, str]]
) -> tuple[list[tuple[str, int, bytes | None]], list[tuple[str, int]]]:
    """Every directory and regular file under ``root`` as ``(path, mode, bytes)``
    (``None`` for a directory), paths relative to ``root``; links are dropped."""
    files: list[tuple[str, int, bytes | None]] = []
    sizes: list[tuple[str, int]] = []
    if root is None:
        return files, sizes
    todo = [""]
    while todo:
        relative = todo.pop()
        with os.scandir(os.path.join(root, relative) if relative else root) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                path = os.path.join(relative, entry.name) if relative else entry.name
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    files.append((path, stat.S_IMODE(info.st_mode), None))
                    todo.append(path)
                elif stat.S_ISREG(info.st_mode):
                    with open(entry.path, "rb") as fh:
                        data = fh.read()
                    files.append((path, stat.S_IMODE(info.st_mode), data))
                    sizes.append((f"file {path}", len(data)))
                else:
                    dropped.append((f"file {path}", "only regular files and directories persist"))
    return files, sizes


# --- restoring ------------------------------------------------------------------------


def restore(
    blob: bytes, *, profile: str, sdk: Mapping[str, Any], files_root: str | None
) -> dict[str, Any]:
    """The namespace the next program runs in, with the carried globals (files written
    back under ``files_root``). Raises :class:`RestoreError`."""
    if not blob:
        return {}
    try:
        if not blob.startswith(MAGIC):
            raise RestoreError("not a session state")
        fmt, saved_profile, plain_bytes, object_bytes, modules, files = marshal.loads(
            memoryview(blob)[len(MAGIC) :]  # no copy of the blob
        )
        if fmt != FORMAT or saved_profile != profile:
            raise RestoreError(f"a state of format {fmt} for the {saved_profile} profile")
        plain = _load_plain(plain_bytes, profile)
        env: dict[str, Any] = {}
        if object_bytes:
            loader = _ObjectLoader(io.BytesIO(object_bytes), plain, sdk)
            env = loader.load().__globals__
            loader.env = env
            objects = loader.load()
            for name in [n for n, v in env.items() if v is _DROPPED]:
                del env[name]
        else:
            objects = {}
        env.update(plain)
        env.update(objects)
        for name, module in modules.items():
            env[name] = _import(module, profile)
        _unpack_files(files_root, files)
    except RestoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the state's own objects raise
        raise RestoreError(cap_reason(f"{type(exc).__name__}: {exc}")) from None
    return env


class _PlainLoader(pickle.Unpickler):
    """The restricted profile's loader: plain value classes only, nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED_CLASSES.get((module, name))
        if found is None:
            raise RestoreError(f"the restricted profile does not restore {module}.{name}")
        return found


def _load_plain(data: bytes, profile: str) -> dict[str, Any]:
    if profile == "restricted":
        loaded = _PlainLoader(io.BytesIO(data)).load()
    else:
        loaded = pickle.loads(data)
    if type(loaded) is not dict:
        raise RestoreError("the plain group is not a namespace")
    return loaded


class _Gone:
    """A carried reference to an SDK name the new run's SDK no longer has."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, *args: object, **kwargs: object) -> Any:
        raise NameError(f"{self.path} is no longer in the SDK of this run")

    def __repr__(self) -> str:
        return f"<{self.path}: gone from the SDK>"


class _ObjectLoader(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, plain: dict[str, Any], sdk: Mapping[str, Any]) -> None:
        super().__init__(file)
        self._plain = plain
        self._sdk = sdk
        self.env: dict[str, Any] = {}

    def persistent_load(self, pid: Any) -> Any:
        kind, *rest = pid
        if kind == "env":
            return self.env
        if kind == "plain":
            return self._plain[rest[0]]
        if kind == "dropped":
            return _DROPPED
        if kind == "sdk":
            found: Any = self._sdk.get(rest[0], None)
            for attr in rest[1:]:
                found = getattr(found, attr, None)
            return found if found is not None else _Gone(".".join(rest))
        raise RestoreError(f"unknown reference {kind!r}")


def _import(module: str, profile: str) -> Any:
    if profile == "restricted":
        from ._stdlib import vetted_module

        return vetted_module(module)
    return importlib.import_module(module)


def _unpack_files(root: str | None, files: list[tuple[str, int, bytes | None]]) -> None:
    if root is None:
        return
    for path, mode, data in files:
        if os.path.isabs(path) or ".." in path.split(os.sep):
            raise RestoreError(f"a file path outside the working directory: {path!r}")
        target = os.path.join(root, path)
        if data is None:
            os.makedirs(target, exist_ok=True)
            os.chmod(target, mode | 0o700)
            continue
        with open(target, "wb") as fh:
            fh.write(data)
        os.chmod(target, mode)
