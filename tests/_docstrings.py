"""What a package's public face leaves undocumented: every public class, function,
method and property its ``__all__`` names must say what the caller gets (an override
may inherit its base's docstring, as ``inspect.getdoc`` reads it), and send the reader to
nothing private."""

from __future__ import annotations

import inspect
import re
from types import ModuleType


def undocumented(module: ModuleType) -> list[str]:
    """``module.Name`` or ``module.Class.member`` for each public entry without a docstring."""
    missing: list[str] = []
    for name in module.__all__:
        obj = getattr(module, name)
        where = f"{module.__name__}.{name}"
        if inspect.isfunction(obj) and not inspect.getdoc(obj):
            missing.append(where)
        package = module.__name__.split(".")[0]
        if not inspect.isclass(obj) or obj.__module__.split(".")[0] != package:
            continue
        if not inspect.getdoc(obj):
            missing.append(where)
        for member, value in inspect.getmembers(obj):
            if member.startswith("_"):
                continue
            static = inspect.getattr_static(obj, member)
            if isinstance(static, property):
                value = static.fget
            elif isinstance(static, classmethod | staticmethod):
                value = static.__func__
            if not inspect.isfunction(value):
                continue
            owner = value.__module__.split(".")[0] if value.__module__ else ""
            if owner not in ("ptc", "worker"):
                continue  # a builtin's or a library's, documented there
            if not (value.__doc__ or inspect.getdoc(getattr(obj, member, None))):
                missing.append(f"{where}.{member}")
    return missing


_PRIVATE = re.compile(r"\b(?:ptc|worker|sdkgen)(?:\.\w+)*\._\w+")


def private_references(module: ModuleType) -> list[str]:
    """``where: name`` for each private module or name a public docstring points at."""
    found: list[str] = []
    for name in module.__all__:
        obj = getattr(module, name)
        docs = [(name, inspect.getdoc(obj) or "")]
        if inspect.isclass(obj):
            docs += [
                (f"{name}.{member}", inspect.getdoc(value) or "")
                for member, value in inspect.getmembers(obj)
                if not member.startswith("_")
            ]
        found += [f"{where}: {hit}" for where, doc in docs for hit in _PRIVATE.findall(doc)]
    return found
