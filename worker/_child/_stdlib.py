"""The standard library a restricted program may import, attribute by attribute.

``import json`` gives a program a :class:`~._guards.VettedModule`: a fresh module object
holding only the attributes listed in :data:`EXPOSED` (the real objects) and
:data:`REPLACED` (safe replacements), never a reference to the real module. Everything
else the real module has (``json.codecs``, ``datetime.sys``, ``fractions.operator``,
``functools.singledispatch``, ``collections.UserString``, ...) is a ``policy`` violation.

Why something is left out or replaced (``tests/security/test_restricted_surface.py``
audits every public name of every allowed module and every exposed class against this):

- it reaches modules, frames, code or builtins (module-valued attributes, ``datetime_CAPI``);
- it reads or writes attributes whose names the program chooses, out of the guards'
  sight: ``functools.update_wrapper``/``wraps`` (replaced: they copy only ``__name__``,
  ``__qualname__`` and ``__doc__``, onto functions the program defined);
  ``functools.total_ordering`` (replaced: program classes only);
- it evaluates strings as Python: ``functools.singledispatch`` (``register`` runs
  ``typing.get_type_hints`` on string annotations); ``collections.namedtuple`` stays:
  its ``eval`` only ever sees identifiers it validated itself;
- it walks attributes in a format string: ``collections.UserString.format``,
  ``string.Formatter``;
- it is shared mutable state of the process: ``decimal.DefaultContext`` and the other
  template contexts, ``decimal.setcontext``, ``time.tzset``, ``sys.setrecursionlimit``
  (``sys`` is a read-only subset: versions, platform, limits, ``exit``), ``typing``'s
  overload registry;
- it writes a marker attribute onto whatever it is given: ``typing.final``,
  ``no_type_check``, ``runtime_checkable``, ``dataclass_transform``, ``abstractmethod``;
- it hands out the run's own machinery: ``sys.modules``/``stdout``/``exc_info``, the
  hooks; ``asyncio`` is ``run``, ``gather``, ``sleep``, ``wait_for`` and two exceptions
  (no loop, task, stream or subprocess; the futures ``gather`` returns are opaque to the
  guards).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import stat
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from keyword import iskeyword
from types import FunctionType
from typing import Any, TypeVar

from ._classes import ProgramClass, no_metaclass, program_class
from ._guards import VettedModule
from ._violations import PolicyViolation

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")

EXPOSED: dict[str, frozenset[str]] = {
    name: frozenset(names.split())
    for name, names in {
        "json": "dump dumps load loads JSONDecoder JSONDecodeError JSONEncoder",
        "re": (
            "compile search match fullmatch split findall finditer sub subn escape purge "
            "error Pattern Match A ASCII DEBUG DOTALL I IGNORECASE L LOCALE M MULTILINE "
            "NOFLAG S U UNICODE VERBOSE X"
        ),
        "math": (
            "acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh "
            "degrees dist e erf erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum "
            "gamma gcd hypot inf isclose isfinite isinf isnan isqrt lcm ldexp lgamma log "
            "log10 log1p log2 modf nan nextafter perm pi pow prod radians remainder sin "
            "sinh sqrt tan tanh tau trunc ulp"
        ),
        "statistics": (
            "correlation covariance fmean geometric_mean harmonic_mean linear_regression "
            "LinearRegression mean median median_grouped median_high median_low mode "
            "multimode NormalDist pstdev pvariance quantiles stdev StatisticsError variance"
        ),
        "datetime": "date datetime time timedelta timezone tzinfo MINYEAR MAXYEAR UTC",
        "collections": (
            "ChainMap Counter OrderedDict UserDict UserList defaultdict deque namedtuple"
        ),
        "itertools": (
            "accumulate chain combinations combinations_with_replacement compress count "
            "cycle dropwhile filterfalse groupby islice pairwise permutations product "
            "repeat starmap takewhile tee zip_longest"
        ),
        "functools": "cache cached_property cmp_to_key lru_cache partial reduce",
        "random": (
            "betavariate choice choices expovariate gammavariate gauss getrandbits getstate "
            "lognormvariate normalvariate paretovariate randbytes randint random randrange "
            "sample seed setstate shuffle triangular uniform vonmisesvariate weibullvariate "
            "Random SystemRandom"
        ),
        "string": (
            "ascii_letters ascii_lowercase ascii_uppercase capwords digits hexdigits "
            "octdigits printable punctuation whitespace Template"
        ),
        "decimal": (
            "Decimal Context DecimalTuple getcontext localcontext MAX_EMAX MAX_PREC MIN_EMIN "
            "MIN_ETINY ROUND_05UP ROUND_CEILING ROUND_DOWN ROUND_FLOOR ROUND_HALF_DOWN "
            "ROUND_HALF_EVEN ROUND_HALF_UP ROUND_UP Clamped ConversionSyntax "
            "DecimalException DivisionByZero DivisionImpossible DivisionUndefined "
            "FloatOperation Inexact InvalidContext InvalidOperation Overflow Rounded "
            "Subnormal Underflow"
        ),
        "fractions": "Fraction",
        "heapq": "heapify heappop heappush heappushpop heapreplace merge nlargest nsmallest",
        "bisect": "bisect bisect_left bisect_right insort insort_left insort_right",
        "textwrap": "TextWrapper dedent fill indent shorten wrap",
        "typing": (
            "AbstractSet Annotated Any AnyStr AsyncContextManager AsyncGenerator AsyncIterable "
            "AsyncIterator Awaitable BinaryIO ByteString Callable ChainMap ClassVar Collection "
            "Concatenate Container ContextManager Coroutine Counter DefaultDict Deque Dict "
            "Final FrozenSet Generator Generic Hashable IO ItemsView Iterable Iterator "
            "KeysView List Literal LiteralString Mapping MappingView Match MutableMapping "
            "MutableSequence MutableSet NamedTuple Never NewType NoReturn NotRequired Optional "
            "OrderedDict ParamSpec ParamSpecArgs ParamSpecKwargs Pattern Protocol Required "
            "Reversible Self Sequence Set Sized SupportsAbs SupportsBytes SupportsComplex "
            "SupportsFloat SupportsIndex SupportsInt SupportsRound TYPE_CHECKING Text TextIO "
            "Tuple Type TypeAlias TypeGuard TypeVar TypeVarTuple TypedDict Union Unpack "
            "ValuesView assert_never assert_type cast get_args is_typeddict "
            "reveal_type"
        ),
        "time": (
            "CLOCK_BOOTTIME CLOCK_MONOTONIC CLOCK_MONOTONIC_RAW CLOCK_PROCESS_CPUTIME_ID "
            "CLOCK_REALTIME CLOCK_TAI CLOCK_THREAD_CPUTIME_ID altzone asctime clock_getres "
            "clock_gettime clock_gettime_ns ctime daylight get_clock_info gmtime localtime "
            "mktime monotonic monotonic_ns perf_counter perf_counter_ns process_time "
            "process_time_ns sleep strftime strptime struct_time thread_time thread_time_ns "
            "time time_ns timezone tzname"
        ),
        "base64": (
            "MAXBINSIZE MAXLINESIZE a85decode a85encode b16decode b16encode b32decode "
            "b32encode b32hexdecode b32hexencode b64decode b64encode b85decode b85encode "
            "bytes_types decode decodebytes encode encodebytes standard_b64decode "
            "standard_b64encode urlsafe_b64decode urlsafe_b64encode"
        ),
        "unicodedata": (
            "UCD bidirectional category combining decimal decomposition digit "
            "east_asian_width is_normalized lookup mirrored name normalize numeric ucd_3_2_0 "
            "unidata_version"
        ),
        "queue": "Empty Full LifoQueue PriorityQueue Queue SimpleQueue",
        "stat": " ".join(name for name in dir(stat) if not name.startswith("_")),
        "sys": (
            "api_version builtin_module_names byteorder copyright exit flags float_info "
            "float_repr_style getdefaultencoding getfilesystemencoding getrecursionlimit "
            "getsizeof hash_info hexversion implementation int_info intern maxsize maxunicode "
            "platform stdlib_module_names thread_info version version_info"
        ),
        "asyncio": "CancelledError TimeoutError gather run sleep wait_for",
        "copy": "Error copy deepcopy error",
        "dataclasses": (
            "Field FrozenInstanceError InitVar KW_ONLY MISSING asdict astuple field fields "
            "is_dataclass replace"
        ),
    }.items()
}
"""Per allowed module: the attributes a program gets as they are (vetted one by one)."""


def _is_program_function(obj: object) -> bool:
    # A program's functions and lambdas share the program's globals, the only ones with
    # program_class as __metaclass__ (a name no program can write).
    return isinstance(obj, FunctionType) and obj.__globals__.get("__metaclass__") is program_class


def _is_program_class(obj: object) -> bool:
    return isinstance(obj, ProgramClass)


def update_wrapper(
    wrapper: _F, wrapped: object, assigned: object = None, updated: object = None
) -> _F:
    """``functools.update_wrapper`` for restricted programs: copies ``__name__``,
    ``__qualname__`` and ``__doc__`` (strings only) onto a function the program defined;
    no ``assigned``/``updated`` (the real one reads and writes any names it is given)."""
    if assigned is not None or updated is not None:
        raise PolicyViolation("functools.update_wrapper/wraps take no assigned or updated")
    if not _is_program_function(wrapper):
        raise PolicyViolation("functools.update_wrapper only updates functions the program defined")
    for name in ("__name__", "__qualname__", "__doc__"):
        value = getattr(wrapped, name, None)
        if isinstance(value, str):
            setattr(wrapper, name, value)
    return wrapper


def wraps(wrapped: object, assigned: object = None, updated: object = None) -> Callable[[_F], _F]:
    """``functools.wraps`` for restricted programs (see :func:`update_wrapper`)."""
    if assigned is not None or updated is not None:
        raise PolicyViolation("functools.update_wrapper/wraps take no assigned or updated")

    def decorate(wrapper: _F) -> _F:
        return update_wrapper(wrapper, wrapped)

    return decorate


def total_ordering(cls: type[_T]) -> type[_T]:
    """``functools.total_ordering``, for classes the program defined only (it writes
    methods into the class it is given)."""
    if not _is_program_class(cls):
        raise PolicyViolation("functools.total_ordering only takes classes the program defined")
    return functools.total_ordering(cls)


_sink: ContextVar[Callable[[str], object] | None] = ContextVar("ptc_sink", default=None)


@contextmanager
def printing_to(sink: Callable[[str], object]) -> Iterator[None]:
    """Where :class:`ProgramStream` writes while one restricted program runs."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


class ProgramStream:
    """``sys.stdout``/``sys.stderr`` of a restricted program: text goes to the run's one
    output (as ``print`` does); ``print(..., file=sys.stderr)`` works."""

    def __init__(self, name: str) -> None:
        self.name = f"<{name}>"
        self.encoding = "utf-8"

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        sink = _sink.get()
        if sink is not None:
            sink(text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def dataclass(cls: Any = None, /, **options: Any) -> Any:
    """``dataclasses.dataclass`` for restricted programs: classes the program defined,
    whose fields are identifiers (the decorator ``exec``s code built from their names,
    and ``__annotations__`` is a dict a program can write)."""

    def wrap(target: Any) -> Any:
        if not _is_program_class(target):
            raise PolicyViolation("dataclasses.dataclass only takes classes the program defined")
        for name in vars(target).get("__annotations__", {}):
            if not (isinstance(name, str) and name.isidentifier() and not iskeyword(name)):
                raise PolicyViolation(f"dataclass field {name!r} is not an identifier")
        return _real_dataclass(target, **options)

    return wrap if cls is None else wrap(cls)


_real_dataclass = dataclasses.dataclass


def get_origin(tp: Any) -> Any:
    """``typing.get_origin``, except that a metaclass comes back as the program's
    ``type`` (``get_origin(Type[int])`` is the real ``type``, which builds classes)."""
    return no_metaclass(typing.get_origin(tp))


REPLACED: dict[str, dict[str, Any]] = {
    "functools": {
        "update_wrapper": update_wrapper,
        "wraps": wraps,
        "total_ordering": total_ordering,
    },
    "sys": {"stdout": ProgramStream("stdout"), "stderr": ProgramStream("stderr")},
    "dataclasses": {"dataclass": dataclass},
    "typing": {"get_origin": get_origin},
}
"""Per allowed module: safe replacements for dangerous callables a program still needs."""

ALLOWED_MODULES = frozenset(EXPOSED)
"""Modules a restricted program may import."""

_vetted: dict[str, VettedModule] = {}


def vetted_module(name: str) -> VettedModule:
    """The program's view of the allowed module ``name`` (built once per process)."""
    module = _vetted.get(name)
    if module is None:
        real = importlib.import_module(name)
        attributes = {attr: getattr(real, attr) for attr in EXPOSED[name]}
        attributes.update(REPLACED.get(name, {}))
        public = {attr for attr in dir(real) if not attr.startswith("_")}
        module = VettedModule(name, attributes, frozenset(public - set(attributes)))
        _vetted[name] = module
    return module
