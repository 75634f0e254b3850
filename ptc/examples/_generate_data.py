"""Regenerate the example data set shipped in ``ptc/examples/data`` (seeded, deterministic).

Run ``python -m ptc.examples._generate_data`` after changing this script and commit both the
script and the data files: the example tools, the tests and the benchmark answers read the
committed files, never a fresh generation.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

SEED = 20240611
DATA_DIR = Path(__file__).with_name("data")

REGIONS = ("AMER", "APAC", "EMEA", "LATAM")
CURRENCIES = {
    "USD": 1.0,
    "EUR": 1.0842,
    "GBP": 1.2671,
    "JPY": 0.006412,
    "BRL": 0.1841,
    "AUD": 0.6623,
    "SGD": 0.7418,
    "CAD": 0.7311,
}
REGION_CURRENCIES = {
    "AMER": ("USD", "CAD"),
    "APAC": ("JPY", "AUD", "SGD"),
    "EMEA": ("EUR", "GBP"),
    "LATAM": ("BRL", "USD"),
}
CATEGORIES = ("sensors", "gateways", "cables", "software", "services", "batteries")
WAREHOUSES = ("W1", "W2", "W3", "W4", "W5")
CITIES = (
    "Amsterdam",
    "Athens",
    "Bangkok",
    "Berlin",
    "Bogota",
    "Buenos Aires",
    "Cairo",
    "Cape Town",
    "Chicago",
    "Delhi",
    "Dublin",
    "Helsinki",
    "Istanbul",
    "Jakarta",
    "Lagos",
    "Lima",
    "Lisbon",
    "London",
    "Madrid",
    "Manila",
    "Melbourne",
    "Mexico City",
    "Montreal",
    "Nairobi",
    "Oslo",
    "Paris",
    "Prague",
    "Rome",
    "Santiago",
    "Seoul",
    "Singapore",
    "Stockholm",
    "Sydney",
    "Tokyo",
    "Toronto",
    "Vienna",
    "Warsaw",
    "Zurich",
)
CONDITIONS = ("sunny", "cloudy", "rain", "snow", "fog", "wind")
TOPICS = {
    "billing": ("invoice", "refund", "credit note", "payment terms", "VAT", "proration"),
    "security": ("SSO", "API keys", "audit log", "encryption at rest", "2FA", "IP allowlist"),
    "devices": ("firmware", "gateway pairing", "battery life", "sensor calibration", "LTE"),
    "shipping": ("customs", "tracking", "returns", "lead time", "warehouse transfer"),
    "api": ("rate limits", "pagination", "webhooks", "idempotency keys", "SDK versions"),
}
FIRST = (
    "Ada",
    "Bruno",
    "Chen",
    "Dalia",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ivo",
    "Jun",
    "Kemal",
    "Lena",
    "Mateo",
    "Nia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
)
COMPANY = (
    "Logistics",
    "Foods",
    "Energy",
    "Health",
    "Labs",
    "Retail",
    "Mobility",
    "Water",
    "Farms",
    "Textiles",
    "Robotics",
    "Telecom",
)
LEGAL_FORMS = ("Ltd", "GmbH", "SA", "Inc", "BV")
PRODUCT_LINES = ("Nano", "Edge", "Core", "Flex", "Terra", "Aero")
SENTENCES = (
    "Customers on annual plans can request a {k} review within {n} days of the renewal date.",
    "The {k} settings are managed per workspace by an administrator.",
    "For {k}, the platform keeps a history of {n} days that support can export on request.",
    "A change to {k} takes effect at the next billing cycle unless stated otherwise.",
    "Contact support with the account id and a short description when {k} fails.",
    "The {k} limits differ between the Starter, Team and Enterprise tiers.",
    "Since version {n}.0, {k} is enabled by default for new organisations.",
    "Partners in the reseller programme handle {k} for their own customers.",
)


def _docs(rng: random.Random) -> list[dict[str, object]]:
    docs: list[dict[str, object]] = []
    for i in range(200):
        topic = rng.choice(sorted(TOPICS))
        keys = rng.sample(TOPICS[topic], 2)
        body = " ".join(
            rng.choice(SENTENCES).format(k=rng.choice(keys), n=rng.choice((7, 14, 30, 60, 90)))
            for _ in range(rng.randint(3, 6))
        )
        docs.append(
            {
                "doc_id": f"doc-{i:03d}",
                "title": f"{keys[0].capitalize()} and {keys[1]}: {topic} guide #{i}",
                "topic": topic,
                "updated": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "body": body,
            }
        )
    return docs


def _customers(rng: random.Random) -> list[dict[str, object]]:
    return [
        {
            "customer_id": f"C{i:04d}",
            "name": f"{rng.choice(FIRST)} {rng.choice(COMPANY)} {rng.choice(LEGAL_FORMS)}",
            "region": rng.choice(REGIONS),
            "segment": rng.choice(("smb", "mid-market", "enterprise")),
            "tier": rng.choice(("bronze", "silver", "gold", "platinum")),
        }
        for i in range(1, 121)
    ]


def _products(rng: random.Random) -> list[dict[str, object]]:
    return [
        {
            "sku": f"SKU-{i:04d}",
            "name": f"{rng.choice(PRODUCT_LINES)} {rng.choice(CATEGORIES)[:-1].capitalize()} "
            f"{rng.randint(1, 9)}{rng.choice('ABCX')}",
            "category": rng.choice(CATEGORIES),
            "unit_price_usd": round(rng.uniform(4, 900), 2),
        }
        for i in range(1, 151)
    ]


def _sales(
    rng: random.Random, customers: list[dict[str, object]], products: list[dict[str, object]]
) -> list[dict[str, object]]:
    rows = []
    for i in range(1, 2001):
        customer = rng.choice(customers)
        product = rng.choice(products)
        region = str(customer["region"])
        currency = rng.choice(REGION_CURRENCIES[region])
        quantity = rng.randint(1, 40)
        usd = float(str(product["unit_price_usd"])) * quantity
        rows.append(
            {
                "order_id": f"O{i:05d}",
                "date": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "region": region,
                "customer_id": customer["customer_id"],
                "sku": product["sku"],
                "quantity": quantity,
                "currency": currency,
                "amount": round(usd / CURRENCIES[currency], 2),
            }
        )
    return rows


def _inventory(rng: random.Random, products: list[dict[str, object]]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for warehouse in WAREHOUSES:
        for product in products:
            # Several stock lots per product and warehouse make this the large listing.
            rows.extend(
                {
                    "warehouse": warehouse,
                    "sku": product["sku"],
                    "lot": f"L{lot}",
                    "bin": f"{warehouse}-{rng.choice('ABCDEFGH')}{rng.randint(1, 40):02d}",
                    "quantity": rng.randint(0, 500),
                    "reorder_level": rng.choice((10, 20, 25, 50, 75, 100)),
                }
                for lot in range(1, rng.randint(1, 5) + 1)
            )
    return rows


def main(out_dir: Path = DATA_DIR) -> None:
    """Write every data file into ``out_dir`` (the package's ``data`` directory by default)."""
    rng = random.Random(SEED)
    customers = _customers(rng)
    products = _products(rng)
    tables: dict[str, list[dict[str, object]]] = {
        "docs": _docs(rng),
        "customers": customers,
        "products": products,
        "sales": _sales(rng, customers, products),
        "inventory": _inventory(rng, products),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("docs", "customers", "products"):
        text = json.dumps(tables[name], indent=1, ensure_ascii=False) + "\n"
        (out_dir / f"{name}.json").write_text(text, encoding="utf-8")
    for name in ("sales", "inventory"):
        with (out_dir / f"{name}.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(tables[name][0]))
            writer.writeheader()
            writer.writerows(tables[name])
    weather = {
        city: {
            "temperature_c": round(rng.uniform(-8, 36), 1),
            "condition": rng.choice(CONDITIONS),
            "humidity_pct": rng.randint(20, 95),
        }
        for city in CITIES
    }
    reference = {"exchange_rates_usd_per_unit": CURRENCIES, "weather": weather}
    text = json.dumps(reference, indent=1, sort_keys=True) + "\n"
    (out_dir / "reference.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
