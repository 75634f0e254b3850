"""The example data set (``ptc/examples/data``) and the pure queries the example tools run.

Everything here is deterministic and side-effect free, so the benchmark's expected answers
can be computed straight from these functions.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from importlib import resources
from typing import Any, Literal

# pydantic needs typing_extensions.TypedDict on Python < 3.12 to build the output schemas.
from typing_extensions import TypedDict

Region = Literal["AMER", "APAC", "EMEA", "LATAM"]
Warehouse = Literal["W1", "W2", "W3", "W4", "W5"]
MAX_PAGE_SIZE = 500


class DocHit(TypedDict):
    doc_id: str
    title: str
    score: int
    snippet: str


class Doc(TypedDict):
    doc_id: str
    title: str
    topic: str
    updated: str
    body: str


class Customer(TypedDict):
    customer_id: str
    name: str
    region: str
    segment: str
    tier: str


class Product(TypedDict):
    sku: str
    name: str
    category: str
    unit_price_usd: float


class Sale(TypedDict):
    order_id: str
    date: str
    region: str
    customer_id: str
    sku: str
    quantity: int
    currency: str
    amount: float


class SalesPage(TypedDict):
    rows: list[Sale]
    page: int
    page_size: int
    total_rows: int
    next_page: int | None


class InventoryLot(TypedDict):
    warehouse: str
    sku: str
    lot: str
    bin: str
    quantity: int
    reorder_level: int


class ExchangeRate(TypedDict):
    currency: str
    usd_per_unit: float


class Weather(TypedDict):
    city: str
    temperature_c: float
    condition: str
    humidity_pct: int


def _read_text(name: str) -> str:
    path = resources.files("ptc.examples").joinpath("data").joinpath(name)
    return path.read_text(encoding="utf-8")


def _read_csv(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_read_text(name))))


@functools.cache
def docs() -> tuple[Doc, ...]:
    loaded: list[Doc] = json.loads(_read_text("docs.json"))
    return tuple(loaded)


@functools.cache
def customers() -> dict[str, Customer]:
    loaded: list[Customer] = json.loads(_read_text("customers.json"))
    return {c["customer_id"]: c for c in loaded}


@functools.cache
def products() -> dict[str, Product]:
    loaded: list[Product] = json.loads(_read_text("products.json"))
    return {p["sku"]: p for p in loaded}


@functools.cache
def sales() -> tuple[Sale, ...]:
    return tuple(
        Sale(
            order_id=r["order_id"],
            date=r["date"],
            region=r["region"],
            customer_id=r["customer_id"],
            sku=r["sku"],
            quantity=int(r["quantity"]),
            currency=r["currency"],
            amount=float(r["amount"]),
        )
        for r in _read_csv("sales.csv")
    )


@functools.cache
def inventory() -> tuple[InventoryLot, ...]:
    return tuple(
        InventoryLot(
            warehouse=r["warehouse"],
            sku=r["sku"],
            lot=r["lot"],
            bin=r["bin"],
            quantity=int(r["quantity"]),
            reorder_level=int(r["reorder_level"]),
        )
        for r in _read_csv("inventory.csv")
    )


@functools.cache
def _reference() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_read_text("reference.json"))
    return loaded


def cities() -> tuple[str, ...]:
    return tuple(sorted(_reference()["weather"]))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def search_docs(query: str, limit: int) -> list[DocHit]:
    """Rank documents by query-term frequency (title hits weigh 3), best first, ties by id."""
    terms = set(_words(query))
    scored: list[DocHit] = []
    for doc in docs():
        title_words, body_words = _words(doc["title"]), _words(doc["body"])
        score = sum(3 * title_words.count(t) + body_words.count(t) for t in terms)
        if score:
            scored.append(
                DocHit(
                    doc_id=doc["doc_id"], title=doc["title"], score=score, snippet=doc["body"][:100]
                )
            )
    scored.sort(key=lambda hit: (-hit["score"], hit["doc_id"]))
    return scored[:limit]


def read_doc(doc_id: str) -> Doc:
    for doc in docs():
        if doc["doc_id"] == doc_id:
            return doc
    raise ValueError(f"no document {doc_id!r}")


def list_sales(region: str | None, page: int, page_size: int) -> SalesPage:
    if page < 1 or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(f"page must be >= 1 and page_size within 1..{MAX_PAGE_SIZE}")
    rows = [s for s in sales() if region is None or s["region"] == region]
    start = (page - 1) * page_size
    has_more = start + page_size < len(rows)
    return SalesPage(
        rows=rows[start : start + page_size],
        page=page,
        page_size=page_size,
        total_rows=len(rows),
        next_page=page + 1 if has_more else None,
    )


def get_customer(customer_id: str) -> Customer:
    try:
        return customers()[customer_id]
    except KeyError:
        raise ValueError(f"no customer {customer_id!r}") from None


def list_products(category: str | None) -> list[Product]:
    return [p for p in products().values() if category is None or p["category"] == category]


def get_product(sku: str) -> Product:
    try:
        return products()[sku]
    except KeyError:
        raise ValueError(f"no product {sku!r}") from None


def get_exchange_rate(currency: str) -> ExchangeRate:
    rates: dict[str, float] = _reference()["exchange_rates_usd_per_unit"]
    code = currency.upper()
    if code not in rates:
        raise ValueError(f"no rate for {currency!r}; known: {', '.join(sorted(rates))}")
    return ExchangeRate(currency=code, usd_per_unit=rates[code])


def lookup_weather(city: str) -> Weather:
    table: dict[str, dict[str, Any]] = _reference()["weather"]
    if city not in table:
        raise ValueError(f"no weather station for {city!r}")
    w = table[city]
    return Weather(
        city=city,
        temperature_c=w["temperature_c"],
        condition=w["condition"],
        humidity_pct=w["humidity_pct"],
    )


def list_inventory(warehouse: str | None, sku: str | None) -> list[InventoryLot]:
    return [
        lot
        for lot in inventory()
        if warehouse in (None, lot["warehouse"]) and sku in (None, lot["sku"])
    ]
