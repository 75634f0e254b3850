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
import __future__

import asyncio
import dataclasses
import decimal
import functools
import importlib
import itertools
import queue
import re
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

import ptc._code._prompt
from tests.security._restricted_surface_data import SURFACE
from worker._child._restricted import restricted_globals
from worker._child._stdlib import ALLOWED_MODULES, EXPOSED, REPLACED, vetted_module
from worker._supervisor import _zygote

MODULE = "a module: reaches sys, os, codecs, operator or the import system"
REEXPORT = "imported from elsewhere; a program imports it from where it is defined"
CONSTANT = "an implementation constant no program needs"
HOOK = "a hook into the interpreter (tracing, auditing, exception and display hooks)"
SETTING = "changes a setting of the whole process (sys is a read-only subset)"
INSTALL = "a path of the host's installation or a fact about the process, not the program's"
MARKS = "writes a marker attribute onto whatever object it is given"
LOOP = (
    "the event loop, tasks, transports, streams, subprocesses and sockets stay out of reach "
    "(asyncio is run, gather, sleep, wait_for and two exceptions)"
)

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
    "typing": {
        **{name: MODULE for name in "collections contextlib functools operator stdlib_re sys "
           "types warnings".split()},
        **{name: "typing's own type variables" for name in "CT_co KT T T_co T_contra VT VT_co "
           "V_co".split()},
        "ABCMeta": REEXPORT + " (abc)",
        "defaultdict": REEXPORT + " (collections)",
        "GenericAlias": REEXPORT + " (types)",
        "MethodDescriptorType": REEXPORT + " (types)",
        "MethodWrapperType": REEXPORT + " (types)",
        "WrapperDescriptorType": REEXPORT + " (types)",
        "EXCLUDED_ATTRIBUTES": "typing's internals",
        "NamedTupleMeta": "the metaclass behind NamedTuple (NamedTuple itself is exposed)",
        "ForwardRef": "evaluates its source text when it is resolved",
        "get_type_hints": "evaluates string annotations (eval)",
        "io": "a deprecated pseudo-module of IO classes",
        "re": "a deprecated pseudo-module of Pattern/Match",
        "abstractmethod": MARKS + " (abc's)",
        "final": MARKS,
        "no_type_check": MARKS + " and onto the functions of a class",
        "no_type_check_decorator": MARKS,
        "dataclass_transform": MARKS,
        "runtime_checkable": MARKS + "; isinstance() then reads attributes by name",
        "overload": "registers into a registry shared by the process",
        "get_overloads": "reads the overload registry shared by the process",
        "clear_overloads": "clears the overload registry shared by the process",
    },
    "time": {
        "clock_settime": SETTING + " (the clock; privileged)",
        "clock_settime_ns": SETTING + " (the clock; privileged)",
        "tzset": SETTING + " (the time zone)",
        "pthread_getcpuclockid": "thread internals",
    },
    "base64": {
        "binascii": MODULE,
        "re": MODULE,
        "struct": MODULE,
        "main": "the command line: reads sys.argv and files",
        "test": "a self-test that reads sys.argv",
    },
    "unicodedata": {},
    "queue": {
        "deque": REEXPORT + " (collections)",
        "heappop": REEXPORT + " (heapq)",
        "heappush": REEXPORT + " (heapq)",
        "time": REEXPORT + " (time.monotonic)",
        "threading": MODULE,
        "types": MODULE,
    },
    "stat": {},
    "sys": {
        **{name: HOOK for name in "addaudithook audit breakpointhook call_tracing displayhook "
           "excepthook getprofile gettrace setprofile settrace unraisablehook "
           "get_asyncgen_hooks set_asyncgen_hooks".split()},
        **{name: SETTING for name in "setrecursionlimit setswitchinterval "
           "set_int_max_str_digits setdlopenflags set_coroutine_origin_tracking_depth".split()},
        **{name: INSTALL for name in "abiflags base_exec_prefix base_prefix exec_prefix "
           "executable platlibdir prefix pycache_prefix dont_write_bytecode "
           "getdlopenflags getfilesystemencodeerrors get_int_max_str_digits "
           "get_coroutine_origin_tracking_depth getswitchinterval is_finalizing "
           "getallocatedblocks getrefcount".split()},
        **{name: "the import system" for name in "meta_path modules path path_hooks "
           "path_importer_cache".split()},
        **{name: "the process's arguments and options (mutable lists)" for name in
           "argv orig_argv warnoptions".split()},
        "exc_info": "hands over tracebacks (and their frames)",
        "exception": "the exception being handled, with its traceback: use except ... as e",
        "stdin": "the run has no input",
    },
    "asyncio": {
        name: LOOP
        for name in dir(asyncio)
        if not name.startswith("_")
        and name not in {"CancelledError", "TimeoutError", "gather", "run", "sleep", "wait_for"}
    },
    "copy": {"dispatch_table": "copyreg's table of reducers, shared by the process (writable)"},
    "dataclasses": {
        **{name: MODULE for name in "abc builtins copy functools inspect itertools keyword re "
           "sys types".split()},
        "FunctionType": REEXPORT + " (types)",
        "GenericAlias": REEXPORT + " (types)",
        "make_dataclass": "builds a class outside the class statement and its policy",
    },
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
    "worker._child._stdlib.dataclass": "reads the class's own __annotations__ to check its fields",
    "worker._child._classes.program_class": "reads __module__ of a base's metaclass",
    # typing (issue 23)
    "typing._BaseGenericAlias.__getattr__": (
        "forwards a non-dunder name, already checked by the guard, to the alias's origin "
        "class; the value is checked too"
    ),
    "typing._BaseGenericAlias.__setattr__": (
        "forwards a write to the origin class: only reached by writing an alias's attribute, "
        "which the write guard refuses (an alias is not writable)"
    ),
    "typing.Annotated.__init_subclass__": "a fixed message template",
    "typing._AnnotatedAlias.__repr__": "a fixed template",
    "typing.Protocol.__init_subclass__": "reads fixed names of the protocol class itself",
    "typing.Protocol.__init_subclass__.<locals>._proto_hook": (
        "isinstance() of a runtime protocol: hasattr() of the protocol's own member names, "
        "a boolean (runtime_checkable is dropped, so a program's protocols never get here)"
    ),
    "typing._get_protocol_attrs": "collects the names a protocol class defines itself",
    "typing._is_callable_members_only": "reads a protocol's own members",
    "typing._caller": "reads __name__ of the caller's globals, for __module__ (as namedtuple)",
    "typing._GenericAlias.__reduce__": (
        "copy support: looks the alias's own name up in typing's globals and returns "
        "operator.getitem, which copy calls on the alias's origin (the program never holds it)"
    ),
    "typing._GenericAlias._make_substitution": "fixed __typing_*__ names of type parameters",
    "typing._GenericAlias._determine_new_args": "fixed __typing_*__ names of type parameters",
    "typing._is_unpacked_typevartuple": "a fixed __typing_*__ name",
    "typing.TypeVarTuple.__typing_prepare_subst__": "fixed __typing_*__ names",
    "typing.TypeVar.__typing_subst__": "fixed __typing_*__ names",
    "typing.ForwardRef.__init__": (
        "compiles a string annotation to check its syntax; nothing runs it (ForwardRef."
        "_evaluate is reached only through get_type_hints, which is dropped)"
    ),
    "typing.ForwardRef._evaluate": (
        "eval of a string annotation: reached only through get_type_hints/_eval_type "
        "(dropped); a program holding a ForwardRef (through __args__) cannot reach _evaluate"
    ),
    # typing_extensions patches typing in this test process (pydantic imports it); a child
    # never imports it, but its replacements are vetted all the same.
    "typing_extensions._collect_parameters": "fixed dunder names of a generic's parameters",
    "typing_extensions._has_generic_or_protocol_as_origin": (
        "reads the caller's frame locals to tell Generic/Protocol subscription apart"
    ),
    "typing_extensions._proto_hook": "hasattr() of a protocol's own member names",
    "typing_extensions.is_protocol": "reads fixed names of a class",
    # copy, dataclasses, base64, asyncio (issue 23)
    "copy.copy": "reads the copy protocol's fixed names (__copy__, __reduce_ex__)",
    "copy.deepcopy": "reads the copy protocol's fixed names (__deepcopy__, __reduce_ex__)",
    "copy._reconstruct": "sets state onto the new object it has just built, never an existing one",
    "dataclasses._create_fn": (
        "exec of method source built from field names (identifiers: the replacement checks "
        "every annotation of the class) and fixed names; types and defaults go as locals, "
        "never as text"
    ),
    "dataclasses._process_class": (
        "reads, sets and deletes the class's own attributes by field names and fixed "
        "dunders, on a class the program defined (the replacement checks)"
    ),
    "dataclasses._set_new_attribute": "sets a generated method on the program's class",
    "dataclasses._get_field": "reads the class's own default for a field",
    "dataclasses._add_slots": "reads fixed names while rebuilding the class with __slots__",
    "dataclasses._dataclass_getstate": "reads a dataclass's own fields (pickle support)",
    "dataclasses.fields": "reads __dataclass_fields__",
    "dataclasses.Field.__set_name__": "calls __set_name__ of a field's default",
    "dataclasses._astuple_inner": "reads a dataclass's own fields by their (validated) names",
    "dataclasses._asdict_inner": "reads a dataclass's own fields by their (validated) names",
    "dataclasses.replace": "reads a dataclass's own fields by their (validated) names",
    "base64._input_type_check": "a fixed message template",
    "base64.a85decode": "a fixed message template",
    "asyncio.runners.Runner.run": "a fixed message template; fixed names of the coroutine",
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
    for cls in _TYPES_OF_VALUES:
        found.setdefault(f"values.{cls.__qualname__}", cls)
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
    decimal.Context().flags,
    NotImplemented,
    ...,
    super(int, 1),
    sys.flags,
    sys.float_info,
    sys.int_info,
    sys.hash_info,
    sys.thread_info,
    sys.version_info,
    sys.implementation,  # a SimpleNamespace, as time.get_clock_info() returns
    __future__.annotations,
    queue.Queue().mutex,
    queue.Queue().not_empty,
    dataclasses.MISSING,
    dataclasses.KW_ONLY,
    # typing's aliases and special forms (the spelling matters: typing.List, not list)
    typing.List,  # noqa: UP006
    typing.List[int],  # noqa: UP006
    typing.Union,
    typing.Union[int, str],  # noqa: UP007
    typing.Literal[1],
    typing.Callable,
    typing.Callable[[int], int],
    typing.Tuple,  # noqa: UP006
    typing.Annotated[int, 1],
    typing.List["x"].__args__[0],  # type: ignore[name-defined,attr-defined]  # noqa: UP006, F821
    typing.TypeVar("T"),
    typing.ParamSpec("P"),
    typing.NewType("N", int),
    REPLACED["sys"]["stdout"],
)

# Types of values a program holds that are awkward to make here: coroutines and async
# generators (of its own async functions), the future asyncio.gather returns (every
# attribute of which the guard refuses, as for any loop object), and the awaitables
# aiter()/anext() and an async generator's asend() make.
_TYPES_OF_VALUES: tuple[type, ...] = (
    types.CoroutineType,
    types.AsyncGeneratorType,
    asyncio.tasks._GatheringFuture,  # type: ignore[attr-defined]
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
    assert set(ptc._code._prompt.ALLOWED_MODULES.split()) == set(ALLOWED_MODULES)
    assert set(_zygote.ALLOWED_MODULES) == set(ALLOWED_MODULES)


@pytest.mark.parametrize("module", sorted(ALLOWED_MODULES))
def test_a_vetted_module_holds_no_module_and_refuses_dropped_names(module: str) -> None:
    from worker._child._violations import PolicyViolation

    view = vetted_module(module)
    assert not any(isinstance(v, types.ModuleType) for v in vars(view).values())
    assert vetted_module(module) is view
    for name in DROPPED[module]:
        with pytest.raises(PolicyViolation, match=f"{module}.{name} is not available"):
            getattr(view, name)
    with pytest.raises(AttributeError):
        view.no_such_name  # noqa: B018
