"""The restricted profile: a typical program works, every known escape is blocked.

Escape corpus: peers.md section 4 and the dependencies.md section 1 table. "Blocked"
means the run ends with kind ``policy`` (compile rejection or guard violation) or an
ordinary ``exception`` that reached nothing; never a value.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from worker._child._outcome import ProgramResult
from worker._child._program import run_program
from worker._child._restricted import ALLOWED_MODULES


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
    "getattr((), '__cla' + 'ss__')",
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
    "'{0.__class__}'.format(1)",
    "str.format('{0.__class__}', 1)",
    "'{x.__class__}'.format_map({'x': 1})",
    "import string\nstring.Formatter().get_field('0.__class__', [1], {})",
    "import string\nstring.Formatter",
    # 5. computed reflection
    "type(())",
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
    "import sys",
    "import _strptime",
    "from . import x",
    "import re\nre.enum",
    "import re\nre._compiler",
    "import functools\nfunctools.partial.__call__",
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
    "async def f():\n    pass",
    "x = {}\nx['a'] += 1",
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
        # Blocked by absence (a NameError for a missing builtin), never by reaching it.
        assert "NameError" in result.detail or "TypeError" in result.detail, result.detail


@pytest.mark.parametrize(
    "payload",
    [
        "import datetime\ndatetime.sys",
        "import json\njson.dumps = len",
        "'{0}'.format(1)",
        "import os",
        "getattr(1, '__class__')",
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
    result, _ = run("a = x._y\nb = __import__")
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
