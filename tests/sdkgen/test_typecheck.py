"""The stub of the representative set type-checks under mypy --strict with a program using it."""

from __future__ import annotations

from pathlib import Path

from mypy import api

import sdkgen

from .cases import HEADER, all_specs

PROGRAM = """
from sdk import ToolCallError, parallel, tools

flights = tools.search_flights(
    route={"origin": "AMS", "destination": "JFK"},
    passengers=[{"name": "Ada", "kind": "adult"}],
)
cheapest: float = min(f["price"] for f in flights["flights"])
legs: list[list[str]] = flights["flights"][0].get("legs", [])
visited: int = tools.tree_walk(root={"label": "a", "children": [{"label": "b"}]})["visited"]
status = tools.set_status(status="closed", level=2)["previous"]
receipt: str | None = tools.pay(method={"voucher": "V1"}, amount=3, note=None)["receipt"]
weather = tools.get_weather_v2(my_city_2="Oslo", p_2fa="x")
celsius: float = weather["temp-c"]
text: str = tools.class_(from_="x", filter="y")
logged = tools.log_event(message="hi")
now: str = tools.now()["iso"]
many = tools.set_status.map([{"status": "open"}, {"status": "closed"}])
first: str = many[0]["previous"]
both = parallel(lambda: tools.now(), lambda: tools.list_())
odd = tools.odd(x=1)
# Open objects: the host accepts other keys, so the checker must too (nested and top level).
labelled = tools.annotate(record={"id": "r1", "colour": "red", "meta": {"k": 1}}, note="n")
label_id: str | None = labelled.get("record", {}).get("id")
anything = tools.anything(any_key=[1, {"a": None}])
patterned = tools.patterned(name="n", **{"x-trace": "t"})
point = tools.pair(point=[1.5, "a"])
low = tools.legacy_range(low=0.5)
try:
    tools.tools__2()
    tools.tools_()
except ToolCallError as e:
    message: str = f"{e.tool} {e.code} {e.message}"
"""

BAD_PROGRAM = """
from sdk import tools
tools.set_status(status="maybe")
tools.now(extra=1)
tools.search_flights(route={"origin": "AMS", "destination": "JFK"})
tools.search_flights(route={}, passengers=[{"name": "A", "kind": "adult", "seat": "1A"}])
"""


def _mypy(tmp_path: Path, program: str) -> tuple[str, int]:
    (tmp_path / "sdk.pyi").write_text(sdkgen.generate(all_specs(), header=HEADER).stub)
    (tmp_path / "program.py").write_text(program)
    out, err, status = api.run(
        [
            "--strict",
            "--no-incremental",
            "--cache-dir=/dev/null",
            "--python-version=3.11",
            str(tmp_path / "sdk.pyi"),
            str(tmp_path / "program.py"),
        ]
    )
    return out + err, status


def test_stub_and_typed_program_pass_mypy_strict_and_bad_calls_fail(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    report, status = _mypy(good, PROGRAM)
    assert status == 0, report
    report, status = _mypy(bad, BAD_PROGRAM)
    assert status == 1
    for line in (3, 4, 5, 6):  # closed objects (additionalProperties: false) stay closed
        assert f"program.py:{line}" in report
