"""Audit of everything a restricted program can reach through its allowlist.

Three checks, each failing when something new and unvetted appears (a Python upgrade, a
change to ``_stdlib``):

1. every public name of every allowed module is either exposed (as is or replaced) or
   left out for a reason written here;
2. every class a program can name (exposed classes and the builtin types of its
   builtins table) has only public attributes that were reviewed
   (``_restricted_surface_data.SURFACE``): a new method could take attribute names, a
   format string or source code;
3. the Python code reachable from the exposed functions and classes (following the
   globals they call) uses ``eval``, ``getattr``, ``setattr``, ``format``,
   ``_getframe``, ... only where a reviewed reason says why that is safe.

To vet something new: read it, decide (expose, replace in ``_stdlib``, or leave out),
then record it here or in ``_restricted_surface_data.py``.
"""

from __future__ import annotations

import decimal
import functools
import importlib
import itertools
import re
import types
from collections.abc import Iterator
from typing import Any

import pytest

import ptc._prompt
from tests.security._restricted_surface_data import SURFACE
from worker import _zygote
from worker._child._restricted import restricted_globals
from worker._child._stdlib import ALLOWED_MODULES, EXPOSED, REPLACED, vetted_module

MODULE = "a module: reaches sys, os, codecs, operator or the import system"
REEXPORT = "imported from elsewhere; a program imports it from where it is defined"
CONSTANT = "an implementation constant no program needs"

DROPPED: dict[str, dict[str, str]] = {
    "bisect": {},
    "collections": {
        "UserString": "its format/format_map walk attributes inside C (issue 10)",
        "abc": MODULE,
    },
    "datetime": {"datetime_CAPI": "a C capsule (raw pointers)", "sys": MODULE},
    "decimal": {
        "BasicContext": "a template context shared by the whole process",
        "DefaultContext": "the template every new context copies: shared mutable state",
        "ExtendedContext": "a template context shared by the whole process",
        "setcontext": "installs a shared template context as the thread's context",
        "HAVE_CONTEXTVAR": CONSTANT,
        "HAVE_THREADS": CONSTANT,
    },
    "fractions": {
        "Decimal": REEXPORT,
        "math": MODULE,
        "numbers": MODULE,
        "operator": MODULE + " (operator.attrgetter walks any names)",
        "re": MODULE,
        "sys": MODULE,
    },
    "functools": {
        "singledispatch": "register() runs typing.get_type_hints: eval of string annotations",
        "singledispatchmethod": "the same registration path as singledispatch",
        "partialmethod": "a descriptor for classes; partial covers programs' needs",
        "recursive_repr": "a repr helper for library classes",
        "get_cache_token": "ABC registry internals",
        "GenericAlias": "typing internals",
        "RLock": REEXPORT + " (threading)",
        "namedtuple": REEXPORT + " (collections)",
        "WRAPPER_ASSIGNMENTS": "only meaningful for the real update_wrapper",
        "WRAPPER_UPDATES": "only meaningful for the real update_wrapper",
    },
    "heapq": {},
    "itertools": {},
    "json": {
        "codecs": MODULE + " (codecs.open reads files)",
        "decoder": MODULE,
        "encoder": MODULE,
        "scanner": MODULE,
        "detect_encoding": "an internal helper of json.loads",
    },
    "math": {},
    "random": {
        name: CONSTANT for name in "BPF LOG4 NV_MAGICCONST RECIP_BPF SG_MAGICCONST TWOPI".split()
    },
    "re": {
        "RegexFlag": "the Enum class itself (its metaclass machinery); the flags stay",
        "Scanner": "undocumented, builds patterns from internals",
        "T": "deprecated template flag",
        "TEMPLATE": "deprecated template flag",
        "template": "deprecated",
        "copyreg": MODULE,
        "enum": MODULE,
        "functools": MODULE + " (functools.update_wrapper, the real one)",
    },
    "statistics": {
        **{
            name: REEXPORT
            for name in (
                "Counter Decimal Fraction bisect_left bisect_right defaultdict erf exp fabs fsum "
                "groupby hypot log mul namedtuple reduce repeat sqrt tau"
            ).split()
        },
        "math": MODULE,
        "numbers": MODULE,
        "random": MODULE,
        "sys": MODULE,
    },
    "string": {"Formatter": "format strings walk attributes (CVE-2023-41039)"},
    "textwrap": {"re": MODULE},
}
"""Per allowed module: each public name a program does not get, and why."""

VETTED_CODE: dict[str, str] = {
    "collections.namedtuple": (
        "eval of 'lambda _cls, a, b: ...' built from field names it validated as "
        "identifiers (no keywords, no leading _), with empty builtins; _getframe(1) only "
        "reads the caller's __name__ for __module__"
    ),
    "functools.update_wrapper": (
        "reached through lru_cache/cache, which pass the default (fixed) attribute names"
    ),
    "re._compile": "compiles a regular expression, not Python",
    "string.Template.__init_subclass__": "re.compile of the subclass's pattern",
    "enum.Enum.__dir__": "getattr with names of the enum's own members (re flags' repr)",
    "worker._child._stdlib.update_wrapper": "the replacement: fixed names, program functions",
    "worker._child._stdlib._is_program_function": "reads __globals__ to recognise the program's",
}
"""Python code reachable from the allowlist that uses a dangerous name, and why it is safe."""

DANGEROUS_NAMES = frozenset(
    "eval exec compile getattr setattr delattr __import__ import_module _getframe format "
    "format_map get_type_hints __globals__ __builtins__ __code__ __subclasses__ vars "
    "globals locals attrgetter methodcaller".split()
)


def public_names(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def exposed_types() -> dict[str, type]:
    """Every class a restricted program can name: exposed ones and builtin types."""
    found: dict[str, type] = {}
    for module in sorted(ALLOWED_MODULES):
        for name, value in vars(vetted_module(module)).items():
            if not name.startswith("_") and isinstance(value, type):
                found[f"{module}.{name}"] = value
    table = restricted_globals(names={}, write=print)["__builtins__"]
    for name, value in table.items():
        if not name.startswith("_") and isinstance(value, type):
            found[f"builtins.{name}"] = value
    for value in _VALUES_A_PROGRAM_HOLDS:
        found.setdefault(f"values.{type(value).__qualname__}", type(value))
    return found


# Instances of classes a program cannot name but gets from its builtins and modules.
_VALUES_A_PROGRAM_HOLDS: tuple[object, ...] = (
    b"",
    bytearray(),
    lambda: 0,
    (n for n in range(0)),
    len,
    [].append,
    object().__str__,
    {}.keys(),
    {}.values(),
    {}.items(),
    iter([]),
    iter(""),
    iter(range(0)),
    iter(()),
    iter({}),
    functools.lru_cache(lambda: 0),
    itertools.tee([])[0],
    re.compile("x").scanner(""),  # type: ignore[attr-defined]  # undocumented, reachable
    decimal.localcontext(),
)


def test_every_public_name_of_every_allowed_module_is_vetted() -> None:
    assert set(DROPPED) == set(ALLOWED_MODULES)
    for module in sorted(ALLOWED_MODULES):
        real = public_names(importlib.import_module(module))
        given = EXPOSED[module] | set(REPLACED.get(module, {}))
        assert not given & set(DROPPED[module]), module
        unvetted = real - given - set(DROPPED[module])
        assert not unvetted, f"{module}: new public names {sorted(unvetted)}: vet them"
        assert given <= real, f"{module}: {sorted(given - real)} no longer exist"
        assert public_names(vetted_module(module)) == given


def test_every_class_a_program_can_name_has_only_reviewed_attributes() -> None:
    types_now = exposed_types()
    assert set(types_now) == set(SURFACE), "classes changed: review the difference"
    for key, cls in sorted(types_now.items()):
        new = public_names(cls) - set(SURFACE[key].split())
        assert not new, f"{key}: new attributes {sorted(new)}: vet them"


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _reachable_python_functions() -> dict[str, types.FunctionType]:
    """Python functions reachable from the allowlist: exposed functions, methods of
    exposed classes, and (transitively) every function or class they name globally."""
    found: dict[str, types.FunctionType] = {}
    seen: set[int] = set()
    todo: list[Any] = [
        value
        for module in ALLOWED_MODULES
        for name, value in vars(vetted_module(module)).items()
        if not name.startswith("_")
    ]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, staticmethod | classmethod):
            todo.append(obj.__func__)
        elif isinstance(obj, property):
            todo.extend(f for f in (obj.fget, obj.fset, obj.fdel) if f is not None)
        elif isinstance(obj, type):
            todo.extend(vars(obj).values())
        elif isinstance(obj, types.FunctionType):
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
            for code in _code_objects(obj.__code__):
                for name in code.co_names:
                    target = obj.__globals__.get(name)
                    if target is not None and not isinstance(target, types.ModuleType):
                        todo.append(target)
    return found


def test_reachable_python_code_uses_dangerous_names_only_where_vetted() -> None:
    functions = _reachable_python_functions()
    assert len(functions) > 100  # the walk really walks
    hits: dict[str, set[str]] = {}
    for qualname, function in functions.items():
        names = set().union(*(set(c.co_names) for c in _code_objects(function.__code__)))
        if names & DANGEROUS_NAMES:
            hits[qualname] = names & DANGEROUS_NAMES
    unvetted = {k: sorted(v) for k, v in hits.items() if k not in VETTED_CODE}
    assert not unvetted, f"vet these uses: {unvetted}"
    assert set(VETTED_CODE) <= set(hits), sorted(set(VETTED_CODE) - set(hits))


def test_the_prompt_the_zygote_and_the_child_list_the_same_modules() -> None:
    assert set(ptc._prompt.ALLOWED_MODULES.split()) == set(ALLOWED_MODULES)
    assert set(_zygote.ALLOWED_MODULES) == set(ALLOWED_MODULES)


@pytest.mark.parametrize("module", sorted(ALLOWED_MODULES))
def test_a_vetted_module_holds_no_module_and_refuses_dropped_names(module: str) -> None:
    from worker._child._guards import PolicyViolation

    view = vetted_module(module)
    assert not any(isinstance(v, types.ModuleType) for v in vars(view).values())
    assert vetted_module(module) is view
    for name in DROPPED[module]:
        with pytest.raises(PolicyViolation, match=f"{module}.{name} is not available"):
            getattr(view, name)
    with pytest.raises(AttributeError):
        view.no_such_name  # noqa: B018
