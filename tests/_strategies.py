"""Hypothesis strategies more than one test module draws from."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Plain JSON values (no NaN or infinity): null, booleans, integers, floats, strings,
    and lists and objects of them, nested."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=max_leaves,
    )
