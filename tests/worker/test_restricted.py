"""The restricted profile: a typical program works, every known escape is blocked.

Escape corpus: peers.md section 4 and the dependencies.md section 1 table. "Blocked"
means the run ends with kind ``policy`` (compile rejection or guard violation) or an
ordinary ``exception`` that reached nothing; never a value.
"""

from __future__ import annotations

import json
import textwrap
import types
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from worker._child._classes import READABLE_DUNDERS, WRITE_DUNDERS
from worker._child._guards import VettedModule, guarded_getattr
from worker._child._outcome import ProgramResult
from worker._child._program import run_program
from worker._child._restricted import ALLOWED_MODULES
from worker._child._violations import PolicyViolation


def run(code: str, **names: object) -> tuple[ProgramResult, str]:
    out: list[str] = []
    result = run_program(
        textwrap.dedent(code),
        profile="restricted",
        names=dict(names),
        result_bytes=10**6,
        write=out.append,
    )
    return result, "".join(out)


TYPICAL = """
import json
import re
import math
import statistics
import datetime
from collections import Counter, defaultdict

orders = json.loads('[{"id": 1, "sku": "a-1", "qty": 3, "price": 2.5, "day": "2024-03-01"},'
                    ' {"id": 2, "sku": "b-2", "qty": 1, "price": 10.0, "day": "2024-03-02"},'
                    ' {"id": 3, "sku": "a-1", "qty": 2, "price": 2.5, "day": "2024-03-02"}]')

class Summary:
    def __init__(self, name):
        self.name = name
        self.items = []

    def add(self, item):
        self.items.append(item)
        return self

by_sku = defaultdict(list)
counts = Counter()
for order in orders:
    by_sku[order["sku"]].append(order)
    counts[order["sku"]] = counts[order["sku"]] + order["qty"]

totals = {}
for sku, rows in sorted(by_sku.items()):
    total = 0
    for row in rows:
        total += row["qty"] * row["price"]
    totals[sku] = round(total, 2)

days = [datetime.datetime.strptime(o["day"], "%Y-%m-%d").date() for o in orders]
span = (max(days) - min(days)).days
prefixes = {m.group(1) for m in (re.match(r"([a-z])-", o["sku"]) for o in orders) if m}
first, *rest = [o["id"] for o in orders]
s = Summary("orders")
for key, value in totals.items():
    s.add(f"{key}={value}")

def report(label, value):
    print(f"{label}: {value}")

report("skus", len(totals))
report("mean qty", statistics.mean(o["qty"] for o in orders))
return {
    "totals": totals,
    "counts": dict(counts),
    "span_days": span,
    "prefixes": sorted(prefixes),
    "sqrt": math.sqrt(16),
    "first": first,
    "rest": rest,
    "summary": s.items,
    "any_big": any(o["qty"] > 2 for o in orders),
}
"""


def test_a_typical_50_line_program_works() -> None:
    assert len(TYPICAL.strip().splitlines()) >= 50
    result, out = run(TYPICAL)
    assert result.ok, result.detail
    assert result.value == {
        "totals": {"a-1": 12.5, "b-2": 10.0},
        "counts": {"a-1": 5, "b-2": 1},
        "span_days": 1,
        "prefixes": ["a", "b"],
        "sqrt": 4.0,
        "first": 1,
        "rest": [2, 3],
        "summary": ["a-1=12.5", "b-2=10.0"],
        "any_big": True,
    }
    assert out == "skus: 2\nmean qty: 2\n"


# Every allowed module the way a data-processing program uses it, including the
# replaced functools.wraps/total_ordering, decimal contexts and datetime.strftime (which
# imports `time` from C through the program's __import__).
DATA_PIPELINE = r"""
import json, re, math, statistics, datetime, random, string, textwrap
import itertools, functools, heapq, bisect
from collections import Counter, defaultdict, deque, OrderedDict, namedtuple
from decimal import Decimal, ROUND_HALF_UP, localcontext
from fractions import Fraction

Row = namedtuple("Row", ["day", "region", "sku", "qty", "price"])
raw = json.loads('{"rows": ["2024-03-01,north,a-1,3,2.50", "2024-03-01,south,b-2,1,10.00",'
                 ' "2024-03-02,north,a-1,2,2.50", "2024-03-03,south,c-3,5,1.25",'
                 ' "2024-03-03,north,b-2,4,10.00"]}')
rows = []
for line in raw["rows"]:
    day, region, sku, qty, price = line.split(",")
    if not re.fullmatch(r"[a-z]-\d", sku):
        continue
    rows.append(Row(datetime.date.fromisoformat(day), region, sku, int(qty), Decimal(price)))

def logged(fn):
    @functools.wraps(fn)
    def inner(*args):
        print("calling", len(args))
        return fn(*args)
    return inner

@logged
def revenue(row):
    return (row.qty * row.price).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

@functools.lru_cache(maxsize=None)
def weekday_name(day):
    return day.strftime("%A")

@functools.total_ordering
class Score:
    def __init__(self, name, value):
        self.name = name
        self.value = value
    def __eq__(self, other):
        return self.value == other.value
    def __lt__(self, other):
        return self.value < other.value

by_region = defaultdict(list)
for row in sorted(rows, key=lambda r: (r.region, r.day)):
    by_region[row.region].append(row)
totals = OrderedDict((region, sum(revenue(r) for r in rs)) for region, rs in by_region.items())
by_day = itertools.groupby(sorted(rows, key=lambda r: r.day), key=lambda r: r.day)
per_day = {str(day): sum(r.qty for r in group) for day, group in by_day}
sku_counts = Counter(r.sku for r in rows)
recent = deque(maxlen=2)
for r in rows:
    recent.append(r.sku)
qtys = [r.qty for r in rows]
cut = sorted(qtys)
random.seed(7)
sample = random.sample(sorted(sku_counts), 2)
with localcontext() as ctx:
    ctx.prec = 6
    share = Decimal(1) / Decimal(3)
best = max(Score(k, v) for k, v in totals.items())
note = string.Template("$n rows, best $b").substitute(n=len(rows), b=best.name)
return {
    "totals": {k: str(v) for k, v in totals.items()},
    "per_day": per_day,
    "top": [list(kv) for kv in heapq.nlargest(2, sku_counts.items(), key=lambda kv: kv[::-1])],
    "rank_of_3": bisect.bisect_left(cut, 3),
    "recent": list(recent),
    "mean": statistics.mean(qtys),
    "stdev": round(statistics.stdev(qtys), 3),
    "hyp": math.hypot(3, 4),
    "fraction": str(Fraction(3, 4) + Fraction(1, 4)),
    "share": str(share),
    "product": functools.reduce(lambda a, b: a * b, qtys, 1),
    "pairs": len(list(itertools.combinations(sku_counts, 2))),
    "weekday": weekday_name(rows[0].day),
    "sample": len(sample),
    "note": textwrap.shorten(note, width=40),
    "upper": string.ascii_uppercase[:3],
}
"""

DATA_PIPELINE_RESULT = {
    "totals": {"north": "52.50", "south": "16.25"},
    "per_day": {"2024-03-01": 4, "2024-03-02": 2, "2024-03-03": 9},
    "top": [["b-2", 2], ["a-1", 2]],
    "rank_of_3": 2,
    "recent": ["c-3", "b-2"],
    "mean": 3,
    "stdev": 1.581,
    "hyp": 5.0,
    "fraction": "1",
    "share": "0.333333",
    "product": 120,
    "pairs": 3,
    "weekday": "Friday",
    "sample": 2,
    "note": "5 rows, best north",
    "upper": "ABC",
}


def test_a_realistic_data_pipeline_over_every_allowed_module_works() -> None:
    assert len(DATA_PIPELINE.strip().splitlines()) >= 50
    result, out = run(DATA_PIPELINE)
    assert result.ok, result.detail
    assert result.value == DATA_PIPELINE_RESULT
    assert out == "calling 1\n" * 5


def test_print_inside_functions_reaches_the_shared_output() -> None:
    result, out = run("def f():\n    print('inner')\nf()\nprint('outer', 1, sep='-')")
    assert result.ok and out == "inner\nouter-1\n"


def test_allowed_modules_import() -> None:
    code = "\n".join(f"import {m}" for m in sorted(ALLOWED_MODULES)) + "\nreturn 1"
    assert run(code)[0].value == 1


def test_tools_namespace_is_reachable() -> None:
    class Tools:
        def search(self, query: str) -> list[str]:
            return [query]

    result, _ = run("return tools.search(query='x')", tools=Tools())
    assert result.value == ["x"]


ESCAPES = [
    # 1. subclass walks
    "().__class__.__base__.__subclasses__()",
    "getattr(getattr((), '__cla' + 'ss__'), '__subcla' + 'sses__')",
    "().__class__.__mro__",
    # 2. function internals
    "def f():\n    pass\nf.__globals__",
    "def f():\n    pass\ngetattr(f, '__globals__')",
    "def f():\n    pass\nf.__code__",
    # 3. frames
    "def g():\n    yield 1\nx = g()\nx.gi_frame",
    "def g():\n    yield 1\ngetattr(g(), 'gi_frame')",
    "try:\n    1/0\nexcept Exception as e:\n    e.__traceback__.tb_frame",
    "__builtins__",
    # 4. format strings
    "'{0.__class__.__base__}'.format(1)",
    "str.format('{0.__globals__}', len)",
    "'{x.__class__.__subclasses__}'.format_map({'x': 1})",
    "import string\nstring.Formatter().get_field('0.__class__', [1], {})",
    "import string\nstring.Formatter",
    # 5. computed reflection
    "type(())('X', (), {})",
    "type.__subclasses__(object)",
    "vars(json)",
    "dir()",
    "import json\nvars(json)['__builtins__']",
    "object.__getattribute__",
    "getattr(len, '__self__')",
    # 6. bound builtins
    "len.__self__.__import__('os')",
    # 7. module side doors
    "import random\nrandom._os",
    "import datetime\ndatetime.sys.modules['os'].getcwd()",
    "from datetime import sys",
    "import statistics\nstatistics.sys",
    "import json\njson.codecs.open('/etc/hostname').read()",
    "import json\ngetattr(json, 'codecs')",
    "from json import codecs",
    "import collections\ncollections._sys",
    "import math\nmath.__loader__",
    "import collections.abc",
    "import operator\noperator.attrgetter('__class__.__base__')(())",
    "import os",
    "import sys\nsys.modules['os']",
    "import sys\nsys._getframe()",
    "import sys\nsys.setrecursionlimit(10)",
    "import asyncio\nasyncio.get_event_loop()",
    "import _strptime",
    "from . import x",
    "import re\nre.enum",
    "import re\nre._compiler",
    "import functools\nfunctools.partial(len).__reduce__()",
    # 8. native code
    "import ctypes",
    # 9/10. exception objects, guard shadowing
    "def f(_getattr_=None):\n    pass",
    "_write_ = lambda x: x",
    "global _getattr_\n_getattr_ = getattr",
    # 11. writes into shared objects
    "import json\njson.dumps = len",
    "import json\nsetattr(json, 'dumps', len)",
    "import math\nmath.pi = 3",
    "import math\ndel math.pi",
    "tools.search = 1",
    # eval/exec/compile/open
    "eval('1')",
    "exec('x = 1')",
    "compile('1', 'x', 'eval')",
    "open('/etc/passwd').read()",
    # print redirection
    "import json\nprint('x', file=json)",
    # unsupported syntax that smuggles behaviour
    "try:\n    pass\nexcept* Exception:\n    pass",
    "match 1:\n    case _:\n        pass",
    # augmented writes go through the write guard
    "import math\nmath.pi += 1",
    "import json\njson.dumps += 1",
]


@pytest.mark.parametrize("payload", ESCAPES)
def test_escape_payloads_are_blocked(payload: str) -> None:
    class Tools:
        def search(self) -> None:
            return None

    result, _ = run(payload, tools=Tools())
    assert not result.ok, f"not blocked: {payload!r} -> {result.value!r}"
    assert result.kind in ("policy", "exception"), result
    if result.kind == "exception":
        # Blocked by absence (a NameError for a missing builtin, a ModuleNotFoundError for a
        # module outside the allowlist), never by reaching it.
        assert any(
            name in result.detail
            for name in ("NameError", "TypeError", "ModuleNotFoundError", "ImportError")
        ), result.detail


@pytest.mark.parametrize(
    "payload",
    [
        "import datetime\ndatetime.sys",
        "import json\njson.dumps = len",
        "'{0.__globals__}'.format(len)",
        "getattr(1, '__subclasses__')",
    ],
)
def test_guard_violations_are_policy_even_when_caught_as_exception(payload: str) -> None:
    code = "try:\n" + textwrap.indent(payload, "    ") + "\nexcept Exception:\n    return 'caught'"
    result, _ = run(code)
    assert result.kind == "policy", result


def test_write_to_json_module_does_not_persist() -> None:
    run("import json\njson.dumps = len")
    assert json.dumps([1]) == "[1]"


def test_compile_rejections_list_every_problem() -> None:
    result, _ = run("a = x.__dict__\nb = __import__")
    assert result.kind == "policy"
    assert "Line 1" in result.detail and "Line 2" in result.detail


def test_strptime_is_let_through_internally() -> None:
    result, _ = run("import datetime\ndatetime.datetime.strptime('2024', '%Y').year")
    assert result.value == 2024


def test_inplace_operators_on_names_work() -> None:
    result, _ = run("x = 1\nx += 2\nx *= 5\ns = 'a'\ns += 'b'\nreturn [x, s]")
    assert result.value == [15, "ab"]


def test_program_classes_are_writable_other_objects_not() -> None:
    ok, _ = run("class A:\n    pass\na = A()\na.x = 1\nsetattr(a, 'y', 2)\nreturn [a.x, a.y]")
    assert ok.value == [1, 2]
    blocked, _ = run("import datetime\nd = datetime.date(2024, 1, 1)\nd.year = 3")
    assert blocked.kind == "policy"


def test_syntax_errors_stay_syntax() -> None:
    assert run("x = (")[0].kind == "syntax"


@pytest.mark.parametrize(
    "handler",
    ["except BaseException:\n    pass", "except:\n    pass", "finally:\n    return 'swallowed'"],
)
@pytest.mark.parametrize(
    "payload",
    [
        "getattr((), '__reduce_ex__')",
        "import json\njson.codecs",
        "import functools\nfunctools.singledispatch",
        "int.mro()",
        "'{0.__self__}'.format(len)",
    ],
)
def test_a_caught_violation_still_ends_the_run_as_policy(payload: str, handler: str) -> None:
    code = "try:\n" + textwrap.indent(payload, "    ") + "\n" + handler + "\nprint('after')\n"
    result, out = run(code + "return 'carried on'")
    assert (result.ok, result.kind) == (False, "policy"), result
    assert result.value is None


def test_the_first_violation_is_the_one_reported() -> None:
    code = (
        "for name in ['__subclasses__', '__dict__']:\n"
        "    try:\n        getattr((), name)\n    except BaseException:\n        pass\n"
        "return 1"
    )
    result, _ = run(code)
    assert result.kind == "policy" and "'__subclasses__'" in result.detail


def test_violations_are_recorded_per_run() -> None:
    assert run("try:\n    int.mro()\nexcept BaseException:\n    pass\nreturn 1")[0].kind == "policy"
    assert run("return 2")[0].value == 2


def test_c_code_imports_the_real_time_and_strptime_the_program_its_vetted_view() -> None:
    ok, _ = run("import datetime\nreturn datetime.date(2024, 3, 1).strftime('%A %j')")
    assert ok.value == "Friday 061"
    for code in ("import time\ntime.tzset", "from time import tzset"):
        assert run(code)[0].kind == "policy", code
    refused = run("import _strptime")[0]
    assert refused.kind == "exception" and "ModuleNotFoundError" in refused.detail


def test_decimal_contexts_are_writable_other_library_objects_not() -> None:
    ok, _ = run(
        "import decimal\nctx = decimal.Context()\nctx.prec = 3\n"
        "return str(ctx.divide(decimal.Decimal(1), decimal.Decimal(3)))"
    )
    assert ok.value == "0.333"
    blocked, _ = run("import textwrap\nw = textwrap.TextWrapper()\nw.width = 3")
    assert blocked.kind == "policy"


def test_functools_replacements_keep_decorators_working() -> None:
    code = """
    import functools
    def deco(fn):
        @functools.wraps(fn)
        def inner(x):
            return fn(x) + 1
        return inner
    @deco
    def double(x):
        "Doubles."
        return 2 * x
    @functools.total_ordering
    class V:
        def __init__(self, v):
            self.v = v
        def __lt__(self, other):
            return self.v < other.v
        def __eq__(self, other):
            return self.v == other.v
    return [double(3), V(1) <= V(2), V(3) >= V(2)]
    """
    result, _ = run(code)
    assert result.value == [7, True, True], result.detail


def _samples() -> list[object]:
    from worker._child._stdlib import ALLOWED_MODULES, vetted_module

    def gen() -> Iterator[int]:
        yield 1

    views: list[object] = [vetted_module(m) for m in sorted(ALLOWED_MODULES)]
    values: list[object] = [(), 1, "s", [], {}, len, int, str, gen(), ValueError("x")]
    return views + values + [getattr(v, n) for v in views for n in sorted(vars(v))[:8]]


SAMPLES = _samples()
NAMES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(sorted(INSPECT_ATTRIBUTES | {"mro", "register", "obj", "format"})),
)


@settings(max_examples=300, deadline=None)
@given(obj=st.sampled_from(SAMPLES), name=NAMES)
def test_a_guarded_read_never_yields_a_module_frame_or_code(obj: object, name: str) -> None:
    try:
        value = guarded_getattr(obj, name)
    except (PolicyViolation, AttributeError):
        return
    assert (not name.startswith("_") or name in READABLE_DUNDERS) and name not in INSPECT_ATTRIBUTES
    assert not isinstance(value, types.FrameType | types.CodeType | types.TracebackType)
    assert not isinstance(value, types.ModuleType) or isinstance(value, VettedModule)


@given(
    obj=st.sampled_from(SAMPLES),
    name=st.text(max_size=12)
    .map(lambda t: "_" + t)
    .filter(lambda n: n not in READABLE_DUNDERS | WRITE_DUNDERS and n != "_"),
)
def test_private_and_other_dunder_names_are_refused_on_every_library_object(
    obj: object, name: str
) -> None:
    with pytest.raises(PolicyViolation):
        guarded_getattr(obj, name)


# --- what the widened profile (issue 23) lets through, and how its errors read ----------

WIDENED = """
from __future__ import annotations
import asyncio, base64, copy, dataclasses, queue, stat, sys, time, typing, unicodedata
from typing import Optional

@dataclasses.dataclass
class Item:
    name: str
    qty: int = 0

class Bag:
    _registry: dict = {}

    def __init__(self, *items: Item) -> None:
        self._items = list(items)
        self.count = 0

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __getitem__(self, i):
        return self._items[i]

    def __contains__(self, name):
        return any(i.name == name for i in self._items)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.count += 100
        return False

    def __eq__(self, other):
        return isinstance(other, Bag) and self._items == other._items

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}({len(self)})"

def counter():
    n = 0
    def bump():
        nonlocal n
        n += 1
        return n
    return bump

total: int = 0
bag = Bag(Item("a", 2), Item("b", 3))
with bag:
    for item in bag:
        bag.count += item.qty
        total += item.qty
stock = {"a": 1}
stock["a"] += 4
bump = counter()
bump()
_hidden = bump()
try:
    raise KeyError("missing")
except KeyError as e:
    error = type(e).__name__ + ":" + e.__class__.__qualname__

async def fetch(x):
    await asyncio.sleep(0)
    return x * 2

doubled = await asyncio.gather(fetch(1), fetch(2))
q = queue.Queue()
q.put(1)
print("printed", file=sys.stderr)
return {
    "bag": repr(bag), "len": len(bag), "in": "b" in bag, "first": bag[0].name,
    "count": bag.count, "total": total, "stock": stock, "nonlocal": _hidden,
    "error": error, "eq": bag == copy.deepcopy(bag), "doubled": doubled,
    "b64": base64.b64encode(b"hi").decode(), "name": unicodedata.name("a"),
    "reg": stat.S_ISREG(0o100644), "queue": q.get(), "py": sys.version_info[0],
    "tick": time.monotonic() > 0, "opt": typing.get_args(Optional[int])[0].__name__,
    "fmt": "{} {name!r:>5}".format(1, name="x"), "bin": bin(5), "format": format(3.5, ".1f"),
    "not_impl": NotImplemented is not None, "dc": dataclasses.asdict(Item("z"))["qty"],
}
"""


def test_ordinary_python_the_widened_profile_lets_through() -> None:
    result, out = run(WIDENED)
    assert result.ok, result.detail
    assert result.value == {
        "bag": "Bag(2)",
        "len": 2,
        "in": True,
        "first": "a",
        "count": 105,
        "total": 5,
        "stock": {"a": 5},
        "nonlocal": 2,
        "error": "KeyError:KeyError",
        "eq": True,
        "doubled": [2, 4],
        "b64": "aGk=",
        "name": "LATIN SMALL LETTER A",
        "reg": True,
        "queue": 1,
        "py": 3,
        "tick": True,
        "opt": "int",
        "fmt": "1   'x'",
        "bin": "0b101",
        "format": "3.5",
        "not_impl": True,
        "dc": 0,
    }
    assert out == "printed\n"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("list(**1)", "TypeError: list() argument after ** must be a mapping, not int"),
        ("getattr()", "TypeError: getattr expected at least 2 arguments, got 0"),
        ("hasattr(1)", "TypeError: hasattr expected 2 arguments, got 1"),
        ("getattr(1, 'x', kw=2)", "TypeError: getattr() takes no keyword arguments"),
        ("import itertools\na, b = itertools.count()", "ValueError: too many values to unpack"),
        ("a, b = [1]", "ValueError: not enough values to unpack (expected 2, got 1)"),
        ("class A:\n    pass\nA().n += 1", "AttributeError: 'A' object has no attribute 'n'"),
        ("d = {}\nd['k'] += 1", "KeyError: 'k'"),
        ("print('x', sep=1)", "TypeError: sep must be None or a string, not int"),
        ("type(1, 2)", "TypeError: type() takes 1 or 3 arguments"),
        ("import nonexistent", "ModuleNotFoundError: No module named 'nonexistent'"),
        ("from . import x", "ImportError: attempted relative import with no known parent package"),
    ],
)
def test_errors_read_as_cpythons_and_name_no_internals(code: str, message: str) -> None:
    result, _ = run(code)
    assert result.kind == "exception", result
    last = result.detail.splitlines()[-1]
    assert last.startswith(message), result.detail
    assert "worker" not in result.detail and "_apply" not in result.detail
    assert "guarded" not in result.detail


def test_an_endless_iterator_unpacked_takes_one_item_too_many_not_all() -> None:
    code = (
        "import itertools\nc = itertools.count()\n"
        "try:\n    a, b = c\nexcept ValueError:\n    pass\nnext(c)"
    )
    assert run(code)[0].value == 3


def test_a_metaclass_never_reaches_the_program() -> None:
    code = (
        "import typing\nclass A:\n    pass\n"
        "return [t is type for t in (type(A), A.__class__, type(int), ().__class__.__class__, "
        "typing.get_origin(typing.Type[int]))] + [isinstance(A, type), issubclass(type(A), type)]"
    )
    assert run(code)[0].value == [True] * 7
