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
  template contexts, ``decimal.setcontext``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import FunctionType
from typing import Any, TypeVar

from ._guards import PolicyViolation, ProgramClass, VettedModule

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
    }.items()
}
"""Per allowed module: the attributes a program gets as they are (vetted one by one)."""


def _is_program_function(obj: object) -> bool:
    # A program's functions and lambdas share the program's globals, the only ones with
    # ProgramClass as __metaclass__ (a name no program can write).
    return isinstance(obj, FunctionType) and obj.__globals__.get("__metaclass__") is ProgramClass


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


REPLACED: dict[str, dict[str, Any]] = {
    "functools": {
        "update_wrapper": update_wrapper,
        "wraps": wraps,
        "total_ordering": total_ordering,
    },
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
