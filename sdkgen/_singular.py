"""The singular class name datamodel-code-generator gives the items of an array.

The generator names the object type of an array's items after the array, made singular by
``inflect`` (``PInputConditions`` -> ``PInputCondition``, ``PInputData`` -> ``PInputDatum``;
a word ``inflect`` does not know as a plural gets ``Item``: ``PInputChildren`` ->
``PInputChildrenItem``). :func:`singular_name` gives the same names without importing the
generator: ``inflect`` is the generator's own dependency, loaded the way the generator
loads it (``import inflect`` instruments every method with typeguard, which takes seconds;
the generator runs inflect's module code in a private module whose ``typeguard`` is a
no-op, which takes ~30 ms). Loaded once, on the first array of objects, never at import.
"""

from __future__ import annotations

import builtins
import copy
import functools
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ("singular_name",)

_SUFFIX = "Item"
_PRIVATE_NAME = "sdkgen._inflect"
_lock = threading.Lock()
_engine: Any = None
_unavailable = False


@functools.lru_cache(maxsize=4096)
def singular_name(name: str) -> str | None:
    """The generator's singular of the class name ``name``, or ``None`` when ``inflect``
    cannot be loaded (the caller then leaves the schema to the generator)."""
    with _lock:  # one engine for every thread: it is not documented as thread-safe
        engine = _inflect_engine()
        if engine is None:
            return None
        singular = engine.singular_noun(name)
    return f"{name}{_SUFFIX}" if singular is False else str(singular)


def _inflect_engine() -> Any:
    """The engine (made on first use; the caller holds ``_lock``), or ``None``."""
    global _engine, _unavailable  # noqa: PLW0603 - one engine per process, made lazily
    if _engine is None and not _unavailable:
        try:
            module = sys.modules.get("inflect") or _load_private()
            _engine = module.engine()
        except Exception:  # noqa: BLE001 - any failure: the generator does the naming
            _unavailable = True
    return _engine


def _load_private() -> types.ModuleType:
    """``inflect``'s code run in a module of its own whose ``typeguard`` is a no-op (the
    public ``inflect`` module and ``sys.modules["typeguard"]`` are left alone)."""
    spec = importlib.util.find_spec("inflect")
    get_code = getattr(spec.loader, "get_code", None) if spec is not None else None
    if spec is None or get_code is None:
        raise ImportError("inflect is not importable as Python code")
    code = get_code("inflect")
    private = copy.copy(spec)
    private.name = _PRIVATE_NAME
    module = importlib.util.module_from_spec(private)
    typeguard = types.ModuleType("typeguard")
    typeguard.__dict__["typechecked"] = _no_typecheck
    real_import = builtins.__import__

    def import_(name: str, *args: Any, **kwargs: Any) -> Any:
        return typeguard if name == "typeguard" else real_import(name, *args, **kwargs)

    module.__dict__["__builtins__"] = {**vars(builtins), "__import__": import_}
    sys.modules[_PRIVATE_NAME] = module  # its relative imports (._types) resolve through it
    try:
        exec(code, module.__dict__)  # noqa: S102 - the installed inflect's own code
    except BaseException:
        sys.modules.pop(_PRIVATE_NAME, None)
        raise
    return module


def _no_typecheck(target: Any = None, **_: Any) -> Any:
    return target if target is not None else (lambda wrapped: wrapped)
