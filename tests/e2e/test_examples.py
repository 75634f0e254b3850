"""The example tools work over the shipped data (the benchmark tasks over them, in both modes:
``test_benchmark_commands.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import ptc
from ptc.examples import EXAMPLE_TOOL_NAMES, _data, _generate_data, build_runtime, polls_until_done
from tests._typing import data

DATA_DIR = Path(_data.__file__).with_name("data")
READ_ONLY = set(EXAMPLE_TOOL_NAMES) - {"job_status"}

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runtime() -> AsyncIterator[ptc.ToolRuntime]:
    async with build_runtime() as rt:
        yield rt


def _native(rt: ptc.ToolRuntime) -> Any:
    scope = rt.scope("native")
    scope.present_as("native")
    return scope


def _text(result: ptc.ToolResult) -> Any:
    assert not result.is_error, result.error
    return json.loads(data(result.content)[0]["text"])


def test_shipped_data_is_what_the_seeded_generator_writes(tmp_path: Path) -> None:
    _generate_data.main(tmp_path)
    shipped = sorted(p.name for p in DATA_DIR.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == shipped
    for name in shipped:
        assert (tmp_path / name).read_bytes() == (DATA_DIR / name).read_bytes(), name
    assert sum((DATA_DIR / n).stat().st_size for n in shipped) < 2 * 1024 * 1024


def test_data_set_sizes_match_the_suite_description() -> None:
    assert len(_data.docs()) == 200
    assert len(_data.sales()) == 2000
    assert len(_data.inventory()) > 2000
    assert len(_data.cities()) >= 20


async def test_every_example_tool_is_visible_typed_and_read_only_ones_run_in_parallel(
    runtime: ptc.ToolRuntime,
) -> None:
    visible = _native(runtime).view().visible
    assert set(visible) == set(EXAMPLE_TOOL_NAMES)
    for name, definition in visible.items():
        assert definition.output.schema, name
        assert (definition.concurrency_safe is True) == (name in READ_ONLY), name


async def test_search_ranks_hits_and_read_doc_returns_the_page(runtime: ptc.ToolRuntime) -> None:
    scope = _native(runtime)
    hits = _text(await scope.call("search_docs", {"query": "refund review", "limit": 3}))
    assert len(hits) == 3
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    page = _text(await scope.call("read_doc", {"doc_id": hits[0]["doc_id"]}))
    assert page["body"].startswith(hits[0]["snippet"])
    assert "refund" in (page["title"] + page["body"]).lower()


async def test_sales_pages_cover_every_row_of_a_region_once(runtime: ptc.ToolRuntime) -> None:
    scope = _native(runtime)
    orders, page = [], 1
    while page:
        body = _text(
            await scope.call("list_sales", {"region": "LATAM", "page": page, "page_size": 150})
        )
        orders += [r["order_id"] for r in body["rows"]]
        page = body["next_page"]
    expected = [s["order_id"] for s in _data.sales() if s["region"] == "LATAM"]
    assert orders == expected
    assert body["total_rows"] == len(expected)


@pytest.mark.parametrize(
    ("name", "arguments", "code"),
    [
        ("list_sales", {"region": "MARS"}, "INVALID_ARGS"),
        ("list_sales", {"page_size": 501}, "TOOL_ERROR"),
        ("get_customer", {"customer_id": "C9999"}, "TOOL_ERROR"),
        ("read_doc", {"doc_id": "doc-999"}, "TOOL_ERROR"),
        ("get_exchange_rate", {"currency": "XYZ"}, "TOOL_ERROR"),
        ("lookup_weather", {"city": "Atlantis"}, "TOOL_ERROR"),
    ],
)
async def test_bad_requests_come_back_as_error_results(
    runtime: ptc.ToolRuntime, name: str, arguments: dict[str, Any], code: str
) -> None:
    result = await _native(runtime).call(name, arguments)
    assert result.is_error
    assert result.error is not None and result.error.code == code


async def test_job_status_reaches_done_after_its_poll_count_per_runtime() -> None:
    needed = polls_until_done("job-9")
    for _ in range(2):  # a fresh runtime starts its counters from zero
        async with build_runtime() as rt:
            scope = _native(rt)
            states = [
                _text(await scope.call("job_status", {"job_id": "job-9"}))["state"]
                for _ in range(needed)
            ]
            assert states == ["queued"] + ["running"] * (needed - 2) + ["done"]


async def test_lookups_and_filters_match_the_data(runtime: ptc.ToolRuntime) -> None:
    scope = _native(runtime)
    rate = _text(await scope.call("get_exchange_rate", {"currency": "gbp"}))
    assert rate == {"currency": "GBP", "usd_per_unit": 1.2671}
    lots = _text(await scope.call("list_inventory", {"warehouse": "W2", "sku": "SKU-0003"}))
    assert lots and all(x["warehouse"] == "W2" and x["sku"] == "SKU-0003" for x in lots)
    sensors = _text(await scope.call("list_products", {"category": "sensors"}))
    assert sensors and {p["category"] for p in sensors} == {"sensors"}
    assert _text(await scope.call("get_product", {"sku": sensors[0]["sku"]})) == sensors[0]
    weather = _text(await scope.call("lookup_weather", {"city": "Oslo"}))
    assert weather["city"] == "Oslo" and -10 < weather["temperature_c"] < 40
