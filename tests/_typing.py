"""Typing helpers for tests: reading JSON that a test knows the shape of."""

from __future__ import annotations

from typing import Any


def data(value: object) -> Any:
    """``value`` typed ``Any``: a test indexes JSON whose shape it asserts on anyway."""
    return value
