"""A session's state through real contained children: saved after one run, restored into
a fresh child for the next (``worker._child._session``), carried kinds and dropped ones,
``global`` on the carried namespace, files, the size cap, both profiles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from worker import (
    CallReply,
    CallRequest,
    Containment,
    Limits,
    RunOutcome,
    RunRequest,
    SubprocessBackend,
)

pytestmark = pytest.mark.anyio


async def no_calls(calls: Sequence[CallRequest]) -> Sequence[CallReply]:
    return [CallReply.failure("UNKNOWN_TOOL", "no tools here") for _ in calls]


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(require=frozenset(), pool_size=1)) as started:
        yield started


async def steps(
    backend: SubprocessBackend,
    *programs: str,
    profile: str = "python",
    limits: Limits | None = None,
) -> list[RunOutcome]:
    """Run ``programs`` one after the other on one session, each in a fresh child."""
    state = b""
    outcomes = []
    for code in programs:
        outcome = await backend.run(
            RunRequest(
                code=code,
                sdk_module="",
                profile=profile,  # type: ignore[arg-type]
                limits=limits or Limits(),
                session=state,
            ),
            on_calls=no_calls,
        )
        outcomes.append(outcome)
        if outcome.session is not None and outcome.session.blob is not None:
            state = outcome.session.blob
    return outcomes


DEFINE = r'''
import collections, dataclasses, datetime, decimal, enum, fractions, functools, math, re
import json as js
from typing import NamedTuple

none, true, integer, big = None, True, 42, 2**200
real, cplx, text, raw, mutable_raw = 1.5, 2 + 3j, "héllo", b"\x00\xff", bytearray(b"ab")
items, pair, table, unique, frozen = [1, [2]], (1, "a"), {"k": {"n": [1]}}, {1, 2}, frozenset({3})
cycle = [0]
cycle.append(cycle)
shared = [1, 2]
first, second = shared, shared
ordered = collections.OrderedDict(a=1)
counts = collections.Counter("abca")
queue = collections.deque([1, 2], maxlen=3)
defaults = collections.defaultdict(list, {"x": [1]})
when = datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.timezone.utc)
span = datetime.timedelta(hours=5)
money, third = decimal.Decimal("1.10"), fractions.Fraction(1, 3)
pattern = re.compile(r"a+b")
counter = 0

def bump(step=1):
    global counter
    counter += step
    return counter

square = lambda x: x * x

def make_adder(n):
    def add(x):
        return x + n
    return add

add5 = make_adder(5)

def twice(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(fn(*args))
    return wrapper

@twice
def inc(x):
    return x + 1

cube = functools.partial(pow, exp=3)

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm(self):
        return math.hypot(self.x, self.y)

@dataclasses.dataclass
class Item:
    name: str
    qty: int = 1

class Color(enum.Enum):
    RED = 1

class Pair(NamedTuple):
    a: int
    b: int

class Node:
    def __init__(self):
        self.me = self

p = Point(3, 4)
norm = p.norm
item = Item("x", 2)
red = Color.RED
np = Pair(1, 2)
node = Node()
holder = {"point": p, "items": shared}
m = math
'''

CHECK = r'''
bump(2)
checks = {
    "none": none is None, "true": true is True, "integer": integer == 42, "big": big == 2**200,
    "real": real == 1.5, "cplx": cplx == 2 + 3j, "text": text == "héllo",
    "raw": raw == b"\x00\xff", "bytearray": type(mutable_raw) is bytearray,
    "list": items == [1, [2]], "tuple": pair == (1, "a"), "dict": table["k"]["n"] == [1],
    "set": unique == {1, 2}, "frozenset": frozen == frozenset({3}),
    "cycle": cycle[1] is cycle, "identity": first is second and holder["items"] is shared,
    "ordered": list(ordered) == ["a"], "counter": counts["a"] == 2,
    "deque": list(queue) == [1, 2] and queue.maxlen == 3,
    "defaultdict": defaults["new"] == [] and defaults["x"] == [1],
    "datetime": when.year == 2026 and when.tzinfo is not None, "timedelta": span.seconds == 18000,
    "decimal": str(money) == "1.10", "fraction": third * 3 == 1,
    "regex": pattern.fullmatch("aab") is not None,
    "global": counter == 2 and bump() == 3 and counter == 3,
    "lambda": square(7) == 49, "closure": add5(1) == 6, "decorated": inc(1) == 3,
    "decorated_name": inc.__name__ == "inc", "partial": cube(2) == 8,
    "class": Point(6, 8).norm() == 10.0, "instance": p.norm() == 5.0 and isinstance(p, Point),
    "bound_method": norm() == 5.0, "dataclass": item == Item("x", 2),
    "enum": red is Color.RED, "namedtuple": np.b == 2 and np == Pair(1, 2),
    "self_reference": node.me is node, "module": m.floor(2.5) == 2 and js.dumps([1]) == "[1]",
}
return sorted(name for name, ok in checks.items() if not ok) or len(checks)
'''


async def test_thirty_kinds_survive_a_round_trip_into_a_fresh_child(
    backend: SubprocessBackend,
) -> None:
    defined, checked = await steps(backend, DEFINE, CHECK)
    assert defined.ok, defined.detail
    assert defined.session is not None and defined.session.dropped == ()
    assert {"cycle", "bump", "Point", "p", "m", "js"} <= set(defined.session.names)
    assert checked.ok, checked.detail
    assert isinstance(checked.value, int) and checked.value >= 30, checked.value


async def test_each_kind_that_lives_only_in_its_run_is_dropped_with_its_reason(
    backend: SubprocessBackend,
) -> None:
    program = """
import socket, threading
def numbers():
    yield 1
async def job():
    return 1
async def agen():
    yield 1
gen = numbers()
coro = job()
agen_ = agen()
lock = threading.Lock()
rlock = threading.RLock()
fh = open("notes.txt", "w")
thread = threading.Thread(target=print)
sock = socket.socketpair()[0]
keep = [1, 2]
uses_gen = lambda: next(gen)
coro.close()
"""
    (outcome,) = await steps(backend, program)
    assert outcome.ok, outcome.detail
    assert outcome.session is not None
    dropped = dict(outcome.session.dropped)
    assert set(dropped) == {"gen", "coro", "agen_", "lock", "rlock", "fh", "thread", "sock"}
    assert "generator" in dropped["gen"] and "coroutine" in dropped["coro"]
    assert "generator" in dropped["agen_"] and "lock" in dropped["rlock"]
    assert "open file" in dropped["fh"] and "thread" in dropped["thread"]
    assert "socket" in dropped["sock"]
    assert {"keep", "uses_gen", "numbers", "job"} <= set(outcome.session.names)


async def test_a_carried_function_that_used_a_dropped_value_gets_name_error(
    backend: SubprocessBackend,
) -> None:
    _, outcome = await steps(
        backend,
        "gen = (i for i in range(3))\ndef first():\n    return next(gen)",
        "try:\n    first()\nexcept NameError as exc:\n    return str(exc)",
    )
    assert outcome.ok and "gen" in outcome.value


async def test_an_exception_commits_what_was_assigned_before_it(
    backend: SubprocessBackend,
) -> None:
    failed, after = await steps(backend, "a = 1\nraise ValueError('x')\nb = 2", "return a")
    assert failed.kind == "exception" and failed.session is not None
    assert failed.session.names == ("a",)
    assert after.value == 1


async def test_a_limit_stop_saves_nothing(backend: SubprocessBackend) -> None:
    (outcome,) = await steps(
        backend, "a = 1\nprint('x' * 100)", limits=Limits(stream_bytes=10, output_bytes=10)
    )
    assert outcome.kind == "output-limit" and outcome.session is None


async def test_files_persist_and_links_are_dropped(backend: SubprocessBackend) -> None:
    first, second = await steps(
        backend,
        "import os\nos.makedirs('data/empty')\nopen('data/a.csv', 'w').write('1,2')\n"
        "os.chmod('data/a.csv', 0o640)\nos.symlink('data/a.csv', 'link')",
        "import os, stat\nreturn [open('data/a.csv').read(), os.path.isdir('data/empty'), "
        "oct(stat.S_IMODE(os.stat('data/a.csv').st_mode)), os.path.exists('link')]",
    )
    assert first.ok, first.detail
    assert first.session is not None and dict(first.session.dropped) == {
        "file link": "only regular files and directories persist"
    }
    assert second.value == ["1,2", True, oct(0o640), False]


async def test_state_over_the_cap_is_not_saved_and_the_largest_names_are_named(
    backend: SubprocessBackend,
) -> None:
    (outcome,) = await steps(
        backend,
        "import os\nbig = os.urandom(700_000)\nsmall = 1\n"
        "open('f.bin', 'wb').write(os.urandom(500_000))",
        limits=Limits(session_mib=1),
    )
    assert outcome.ok and outcome.session is not None
    assert outcome.session.blob is None
    problem = outcome.session.problem
    assert "Limits.session_mib" in problem and "big (" in problem and "file f.bin" in problem


async def test_the_restricted_profile_carries_data_and_modules_only(
    backend: SubprocessBackend,
) -> None:
    first, second = await steps(
        backend,
        "import json as j\nimport datetime\nrows = [{'a': 1}]\nwhen = datetime.date(2026, 1, 2)\n"
        "def helper():\n    return 1\nclass Box:\n    pass\nbox = Box()",
        "return [rows, j.dumps(when.year), when.isoformat()]",
        profile="restricted",
    )
    assert first.ok, first.detail
    assert first.session is not None
    dropped = dict(first.session.dropped)
    assert set(dropped) == {"helper", "Box", "box"}
    assert all("data only" in reason for reason in dropped.values())
    assert second.value == [[{"a": 1}], "2026", "2026-01-02"]


async def test_a_state_that_cannot_be_restored_fails_the_run_before_its_program(
    backend: SubprocessBackend,
) -> None:
    outcome = await backend.run(
        RunRequest(code="print('ran')", sdk_module="", session=b"not a state"),
        on_calls=no_calls,
    )
    assert outcome.kind == "exception" and "could not be restored" in outcome.detail
    assert outcome.output.text == "" and outcome.session is None


async def test_a_state_that_cannot_be_saved_keeps_the_run_and_says_why(
    backend: SubprocessBackend,
) -> None:
    (outcome,) = await steps(
        backend, "import os\nopen('secret', 'w').write('x')\nos.chmod('secret', 0)\nreturn 1"
    )
    assert outcome.ok and outcome.value == 1
    assert outcome.session is not None and outcome.session.blob is None
    assert "could not be saved" in outcome.session.problem
