"""The native-vs-code task suite: nine tasks over the example tools.

Each task has three independent parts that must agree:
- ``native``: a scripted stand-in model for native mode. A generator that yields one round of
  tool calls per model turn, receives what the model would read back (each result's content,
  parsed from its JSON text) and returns the final answer;
- ``program``: the Python program code mode sends in one ``run_code`` call; its result is the
  answer;
- ``expected``: the answer computed straight from the data set, without any tool.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from ptc.examples import _data, polls_until_done

JSON = Any


@dataclass(frozen=True, kw_only=True)
class Call:
    """One tool call the scripted model emits."""

    name: str
    arguments: dict[str, JSON]


#: A scripted model: yields a round of calls per turn, receives their parsed results,
#: returns the final answer.
Policy = Generator[list[Call], list[JSON], JSON]


@dataclass(frozen=True, kw_only=True)
class Task:
    name: str
    prompt: str
    kind: str
    native: Callable[[int], Policy]
    program: Callable[[int], str]
    expected: Callable[[int], JSON]


# -- 1. search a corpus and read the hits --------------------------------------------------
DOC_QUERY, DOC_HITS, DOC_PHRASE = "refund review window", 4, "within 30 days"


def _docs_native(_: int) -> Policy:
    (hits,) = yield [Call(name="search_docs", arguments={"query": DOC_QUERY, "limit": DOC_HITS})]
    docs = yield [Call(name="read_doc", arguments={"doc_id": h["doc_id"]}) for h in hits]
    return sorted(d["doc_id"] for d in docs if DOC_PHRASE in d["body"])


def _docs_program(_: int) -> str:
    return f"""
hits = tools.search_docs(query={DOC_QUERY!r}, limit={DOC_HITS})
docs = tools.read_doc.map([{{"doc_id": h["doc_id"]}} for h in hits])
return sorted(d["doc_id"] for d in docs if {DOC_PHRASE!r} in d["body"])
"""


def _docs_expected(_: int) -> JSON:
    hits = _data.search_docs(DOC_QUERY, DOC_HITS)
    return sorted(h["doc_id"] for h in hits if DOC_PHRASE in _data.read_doc(h["doc_id"])["body"])


# -- 2. aggregate a paginated API ----------------------------------------------------------
def _pages(total: int, size: int) -> range:
    return range(2, (total + size - 1) // size + 1)


def _units_native(_: int) -> Policy:
    (first,) = yield [Call(name="list_sales", arguments={"region": "EMEA", "page_size": 100})]
    rest = yield [Call(name="list_sales", arguments={"region": "EMEA", "page": p, "page_size": 100})
                  for p in _pages(first["total_rows"], 100)]
    rows = [r for page in [first, *rest] for r in page["rows"]]
    return {"orders": len(rows), "units": sum(r["quantity"] for r in rows)}


def _units_program(_: int) -> str:
    return """
first = tools.list_sales(region="EMEA", page_size=100)
pages = range(2, (first["total_rows"] + 99) // 100 + 1)
rest = tools.list_sales.map([{"region": "EMEA", "page": p, "page_size": 100} for p in pages])
rows = [r for page in [first, *rest] for r in page["rows"]]
return {"orders": len(rows), "units": sum(r["quantity"] for r in rows)}
"""


def _units_expected(_: int) -> JSON:
    rows = [s for s in _data.sales() if s["region"] == "EMEA"]
    return {"orders": len(rows), "units": sum(r["quantity"] for r in rows)}


# -- 3. join sales with exchange rates -----------------------------------------------------
def _usd_by_region(rows: list[JSON], rates: dict[str, float]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for r in rows:
        totals[r["region"]] += r["amount"] * rates[r["currency"]]
    return {region: round(total, 2) for region, total in sorted(totals.items())}


def _revenue_native(_: int) -> Policy:
    (first,) = yield [Call(name="list_sales", arguments={"page_size": 500})]
    rest = yield [Call(name="list_sales", arguments={"page": p, "page_size": 500})
                  for p in _pages(first["total_rows"], 500)]
    rows = [r for page in [first, *rest] for r in page["rows"]]
    currencies = sorted({r["currency"] for r in rows})
    rates = yield [Call(name="get_exchange_rate", arguments={"currency": c}) for c in currencies]
    return _usd_by_region(rows, {r["currency"]: r["usd_per_unit"] for r in rates})


def _revenue_program(_: int) -> str:
    return """
first = tools.list_sales(page_size=500)
pages = range(2, (first["total_rows"] + 499) // 500 + 1)
rest = tools.list_sales.map([{"page": p, "page_size": 500} for p in pages])
rows = [r for page in [first, *rest] for r in page["rows"]]
currencies = sorted({r["currency"] for r in rows})
rates = {x["currency"]: x["usd_per_unit"]
         for x in tools.get_exchange_rate.map([{"currency": c} for c in currencies])}
totals = {}
for r in rows:
    totals[r["region"]] = totals.get(r["region"], 0.0) + r["amount"] * rates[r["currency"]]
return {region: round(total, 2) for region, total in sorted(totals.items())}
"""


def _revenue_expected(_: int) -> JSON:
    currencies = {s["currency"] for s in _data.sales()}
    rates = {c: _data.get_exchange_rate(c)["usd_per_unit"] for c in currencies}
    return _usd_by_region(list(_data.sales()), rates)


# -- 4. join two sources: top customers by order count, with their records ------------------
TOP_N = 5


def _top_ids(rows: list[JSON]) -> list[str]:
    counts = Counter(r["customer_id"] for r in rows)
    return [cid for cid, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_N]]


def _customers_native(_: int) -> Policy:
    (first,) = yield [Call(name="list_sales", arguments={"region": "APAC", "page_size": 500})]
    rest: list[JSON] = []
    if first["next_page"]:
        rest = yield [
            Call(name="list_sales", arguments={"region": "APAC", "page": p, "page_size": 500})
            for p in _pages(first["total_rows"], 500)
        ]
    rows = [r for page in [first, *rest] for r in page["rows"]]
    found = yield [Call(name="get_customer", arguments={"customer_id": c}) for c in _top_ids(rows)]
    return [[c["customer_id"], c["name"], c["tier"]] for c in found]


def _customers_program(_: int) -> str:
    return f"""
pages = [tools.list_sales(region="APAC", page_size=500)]
while pages[-1]["next_page"]:
    pages.append(tools.list_sales(region="APAC", page=pages[-1]["next_page"], page_size=500))
counts = {{}}
for page in pages:
    for r in page["rows"]:
        counts[r["customer_id"]] = counts.get(r["customer_id"], 0) + 1
top = sorted(counts, key=lambda c: (-counts[c], c))[:{TOP_N}]
found = tools.get_customer.map([{{"customer_id": c}} for c in top])
return [[c["customer_id"], c["name"], c["tier"]] for c in found]
"""


def _customers_expected(_: int) -> JSON:
    top = _top_ids([s for s in _data.sales() if s["region"] == "APAC"])
    return [[c, _data.get_customer(c)["name"], _data.get_customer(c)["tier"]] for c in top]


# -- 5. fan out 20 lookups -----------------------------------------------------------------
def _cities() -> list[str]:
    return list(_data.cities()[:20])


def _weather_answer(reports: list[JSON]) -> JSON:
    warmest = max(reports, key=lambda w: (w["temperature_c"], w["city"]))
    return {"warmest": warmest["city"],
            "rain": sorted(w["city"] for w in reports if w["condition"] == "rain")}


def _weather_native(_: int) -> Policy:
    reports = yield [Call(name="lookup_weather", arguments={"city": c}) for c in _cities()]
    return _weather_answer(reports)


def _weather_program(_: int) -> str:
    return f"""
reports = tools.lookup_weather.map([{{"city": c}} for c in {_cities()!r}])
warmest = max(reports, key=lambda w: (w["temperature_c"], w["city"]))
return {{"warmest": warmest["city"],
        "rain": sorted(w["city"] for w in reports if w["condition"] == "rain")}}
"""


def _weather_expected(_: int) -> JSON:
    return _weather_answer([_data.lookup_weather(c) for c in _cities()])


# -- 6. filter a large listing -------------------------------------------------------------
def _low_stock(lots: list[JSON]) -> JSON:
    return sorted(f"{x['sku']}/{x['lot']}" for x in lots if x["quantity"] < x["reorder_level"])


def _low_stock_native(_: int) -> Policy:
    (lots,) = yield [Call(name="list_inventory", arguments={"warehouse": "W3"})]
    return _low_stock(lots)


def _low_stock_program(_: int) -> str:
    return """
lots = tools.list_inventory(warehouse="W3")
return sorted(f"{x['sku']}/{x['lot']}" for x in lots if x["quantity"] < x["reorder_level"])
"""


def _low_stock_expected(_: int) -> JSON:
    return _low_stock(_data.list_inventory("W3", None))


# -- 7. retry until a condition ------------------------------------------------------------
def _job_id(run: int) -> str:
    # Every run polls a fresh job (counters live in the runtime); ids 7, 11, 15, ... all
    # need the same number of polls, so the expected answer does not depend on the run.
    return f"job-{7 + 4 * run}"


def _job_native(run: int) -> Policy:
    while True:
        (status,) = yield [Call(name="job_status", arguments={"job_id": _job_id(run)})]
        if status["state"] == "done":
            return {"polls": status["polls"], "rows": status["result"]["rows_processed"]}


def _job_program(run: int) -> str:
    return f"""
while True:
    status = tools.job_status(job_id={_job_id(run)!r})
    if status["state"] == "done":
        return {{"polls": status["polls"], "rows": status["result"]["rows_processed"]}}
"""


def _job_expected(run: int) -> JSON:
    needed = polls_until_done(_job_id(run))
    return {"polls": needed, "rows": 1000 + 17 * needed}


# -- 8. one small call: code mode should lose ----------------------------------------------
def _rate_native(_: int) -> Policy:
    (rate,) = yield [Call(name="get_exchange_rate", arguments={"currency": "EUR"})]
    return rate["usd_per_unit"]


def _rate_program(_: int) -> str:
    return 'return tools.get_exchange_rate(currency="EUR")["usd_per_unit"]\n'


def _rate_expected(_: int) -> JSON:
    return _data.get_exchange_rate("EUR")["usd_per_unit"]


# -- 9. a large intermediate result --------------------------------------------------------
def _stock_value(lots: list[JSON], products: list[JSON]) -> JSON:
    price = {p["sku"]: p["unit_price_usd"] for p in products}
    totals: dict[str, float] = defaultdict(float)
    for x in lots:
        totals[x["warehouse"]] += x["quantity"] * price[x["sku"]]
    return {w: round(v, 2) for w, v in sorted(totals.items())}


def _value_native(_: int) -> Policy:
    lots, products = yield [Call(name="list_inventory", arguments={}),
                            Call(name="list_products", arguments={})]
    return _stock_value(lots, products)


def _value_program(_: int) -> str:
    return """
lots, products = parallel(lambda: tools.list_inventory(), lambda: tools.list_products())
price = {p["sku"]: p["unit_price_usd"] for p in products}
totals = {}
for x in lots:
    totals[x["warehouse"]] = totals.get(x["warehouse"], 0.0) + x["quantity"] * price[x["sku"]]
return {w: round(v, 2) for w, v in sorted(totals.items())}
"""


def _value_expected(_: int) -> JSON:
    return _stock_value(list(_data.inventory()), list(_data.products().values()))


# -- 10. one call among 1,000 tools: found through catalog.search ----------------------------
CATALOG_FILLER = 1000
"""BFCL definitions registered beside the example tools for the catalog task."""


def _catalog_native(_: int) -> Policy:
    # The scripted native model is shown every spec and picks the tool by name.
    (rate,) = yield [Call(name="get_exchange_rate", arguments={"currency": "JPY"})]
    return rate["usd_per_unit"]


def _catalog_program(_: int) -> str:
    return """
hits = catalog.search("USD value of a currency unit", limit=3)
rate = tools.call(hits[0]["name"], currency="JPY")
return rate["usd_per_unit"]
"""


def _catalog_expected(_: int) -> JSON:
    return _data.get_exchange_rate("JPY")["usd_per_unit"]


CATALOG_TASKS: tuple[Task, ...] = (
    Task(name="catalog_1000_search", kind="one tool among 1,000 (catalog.search)",
         prompt="What is one JPY worth in USD?",
         native=_catalog_native, program=_catalog_program, expected=_catalog_expected),
)
"""Tasks run on a runtime that also holds :data:`CATALOG_FILLER` BFCL tools."""

TASKS: tuple[Task, ...] = (
    Task(name="docs_search_read", kind="search corpus + read hits",
         prompt=f"Search the docs for '{DOC_QUERY}', read the top {DOC_HITS} hits and list "
                f"the ids of those that say '{DOC_PHRASE}'.",
         native=_docs_native, program=_docs_program, expected=_docs_expected),
    Task(name="sales_pages_units", kind="aggregate a paginated API",
         prompt="How many EMEA orders are there and how many units did they sell in total?",
         native=_units_native, program=_units_program, expected=_units_expected),
    Task(name="revenue_usd_join", kind="join sales with exchange rates",
         prompt="Total revenue per region in USD (each order converted at its currency's rate).",
         native=_revenue_native, program=_revenue_program, expected=_revenue_expected),
    Task(name="top_customers_join", kind="join sales with customers",
         prompt=f"Who are the {TOP_N} APAC customers with the most orders? Give id, name, tier.",
         native=_customers_native, program=_customers_program, expected=_customers_expected),
    Task(name="weather_fanout_20", kind="fan out 20 lookups",
         prompt=f"Check the weather in {', '.join(_cities())}: which city is warmest, and "
                "in which of them does it rain?",
         native=_weather_native, program=_weather_program, expected=_weather_expected),
    Task(name="low_stock_filter", kind="filter a large listing",
         prompt="Which stock lots in warehouse W3 are below their reorder level?",
         native=_low_stock_native, program=_low_stock_program, expected=_low_stock_expected),
    Task(name="job_poll_retry", kind="retry until a condition",
         prompt=f"Poll export job {_job_id(0)} until it is done; report how many polls it "
                "took and how many rows it processed.",
         native=_job_native, program=_job_program, expected=_job_expected),
    Task(name="single_rate", kind="one small call (code should lose)",
         prompt="What is one EUR worth in USD?",
         native=_rate_native, program=_rate_program, expected=_rate_expected),
    Task(name="stock_value_large", kind="large intermediate result",
         prompt="What is the USD value of all stock per warehouse?",
         native=_value_native, program=_value_program, expected=_value_expected),
)
