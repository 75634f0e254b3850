"""The built-in example tools: ten typed tools over the shipped data set.

``register_example_tools(target)`` registers them on a scope or a runtime (its root);
``build_runtime(**kwargs)`` makes a ``ToolRuntime`` with them already registered.
Read-only tools are ``concurrency_safe``; ``job_status`` keeps a poll counter per
registration (so per runtime) and is exclusive.
"""

from collections.abc import Callable
from typing import Any, Protocol

from typing_extensions import TypedDict

import ptc

from . import _data
from ._data import (
    Customer,
    Doc,
    DocHit,
    ExchangeRate,
    InventoryLot,
    Product,
    Region,
    SalesPage,
    Warehouse,
    Weather,
)

#: Polls after which a job reports ``done``: 3 + (the job number mod 4), so 3..6.
JOB_BASE_POLLS = 3


class JobResult(TypedDict):
    rows_processed: int
    output_uri: str


class JobStatus(TypedDict):
    job_id: str
    state: str
    polls: int
    result: JobResult | None


class _Registrar(Protocol):
    def register(self, definition: Any) -> Callable[[], None]: ...


def polls_until_done(job_id: str) -> int:
    """How many ``job_status`` polls a job takes to reach ``done`` (deterministic)."""
    digits = "".join(ch for ch in job_id if ch.isdigit()) or "0"
    return JOB_BASE_POLLS + int(digits) % 4


def _definitions() -> list[Any]:
    polls: dict[str, int] = {}

    @ptc.tool(concurrency_safe=True)
    def search_docs(query: str, limit: int = 5) -> list[DocHit]:
        """Full-text search over the product documentation; best hits first."""
        return _data.search_docs(query, limit)

    @ptc.tool(concurrency_safe=True)
    def read_doc(doc_id: str) -> Doc:
        """Read one documentation page by id (e.g. "doc-042")."""
        return _data.read_doc(doc_id)

    @ptc.tool(concurrency_safe=True)
    def list_sales(region: Region | None = None, page: int = 1, page_size: int = 100) -> SalesPage:
        """List sales orders (amount in the order's currency), paginated; page_size <= 500.

        Follow next_page until it is null to read every row."""
        return _data.list_sales(region, page, page_size)

    @ptc.tool(concurrency_safe=True)
    def get_customer(customer_id: str) -> Customer:
        """Look up one customer by id (e.g. "C0042")."""
        return _data.get_customer(customer_id)

    @ptc.tool(concurrency_safe=True)
    def list_products(category: str | None = None) -> list[Product]:
        """List catalogue products with USD unit prices, optionally of one category."""
        return _data.list_products(category)

    @ptc.tool(concurrency_safe=True)
    def get_product(sku: str) -> Product:
        """Look up one product by SKU (e.g. "SKU-0007")."""
        return _data.get_product(sku)

    @ptc.tool(concurrency_safe=True)
    def get_exchange_rate(currency: str) -> ExchangeRate:
        """USD value of one unit of a currency (ISO code, e.g. "EUR")."""
        return _data.get_exchange_rate(currency)

    @ptc.tool(concurrency_safe=True)
    def lookup_weather(city: str) -> Weather:
        """Current weather for a city (deterministic example data)."""
        return _data.lookup_weather(city)

    @ptc.tool(concurrency_safe=True)
    def list_inventory(
        warehouse: Warehouse | None = None, sku: str | None = None
    ) -> list[InventoryLot]:
        """List stock lots, optionally of one warehouse and/or SKU (large without filters)."""
        return _data.list_inventory(warehouse, sku)

    @ptc.tool
    def job_status(job_id: str) -> JobStatus:
        """Poll a background export job; state goes queued -> running -> done."""
        count = polls[job_id] = polls.get(job_id, 0) + 1
        needed = polls_until_done(job_id)
        if count >= needed:
            result = JobResult(
                rows_processed=1000 + 17 * needed, output_uri=f"s3://exports/{job_id}.csv"
            )
            return JobStatus(job_id=job_id, state="done", polls=count, result=result)
        state = "queued" if count == 1 else "running"
        return JobStatus(job_id=job_id, state=state, polls=count, result=None)

    return [
        search_docs,
        read_doc,
        list_sales,
        get_customer,
        list_products,
        get_product,
        get_exchange_rate,
        lookup_weather,
        list_inventory,
        job_status,
    ]


EXAMPLE_TOOL_NAMES = (
    "search_docs",
    "read_doc",
    "list_sales",
    "get_customer",
    "list_products",
    "get_product",
    "get_exchange_rate",
    "lookup_weather",
    "list_inventory",
    "job_status",
)


def register_example_tools(target: _Registrar) -> Callable[[], None]:
    """Register the ten example tools on ``target`` (a scope, or a runtime's root).

    Returns one disposer that unregisters them all. Each call creates fresh job counters.
    """
    disposers = [target.register(definition) for definition in _definitions()]

    def dispose() -> None:
        for disposer in reversed(disposers):
            disposer()

    return dispose


def build_runtime(**runtime_kwargs: Any) -> "ptc.ToolRuntime":
    """A ``ptc.ToolRuntime(**runtime_kwargs)`` with the example tools on its root scope.

    Use it as ``async with build_runtime() as runtime: ...``.
    """
    runtime = ptc.ToolRuntime(**runtime_kwargs)
    register_example_tools(runtime.root)
    return runtime
