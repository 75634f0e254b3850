"""JSON read as raw bytes: the text outside its strings, its nesting and its values, one
scanner for the frame protocol and ptc.mcp."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from worker._protocol._json_bytes import JsonValues, OutsideStrings, nesting_problem

values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{},"\\ab\n', max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=30,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(values, st.lists(st.integers(0, 60), max_size=6))
def test_pieces_read_as_the_whole_text(value: Any, cuts: list[int]) -> None:
    text = json.dumps(value).encode()
    whole = OutsideStrings().feed(text)
    pieced, reader, start = b"", OutsideStrings(), 0
    for cut in sorted(cuts):
        pieced += reader.feed(text[start:cut])
        start = max(start, cut)
    pieced += reader.feed(text[start:])
    assert pieced.replace(b'""', b"") == whole.replace(b'""', b"")
    assert b'"' not in whole.replace(b'""', b"")  # every string is cut out


@settings(max_examples=300, deadline=None)
@given(values)
def test_nesting_is_the_values_depth(value: Any) -> None:
    text = json.dumps(value).encode()
    deepest = depth(value)
    assert nesting_problem(text, deepest) is None
    if deepest:
        assert nesting_problem(text, deepest - 1) == f"nested deeper than {deepest - 1} levels"


def test_values_are_counted_outside_strings() -> None:
    counter = JsonValues()
    counter.feed(b'[1, "a,[b", {"k": [2, 3]}, []]')
    # the list, 1, "a,[b", the object, [2, 3], 2, 3 and [] (a key is no value)
    assert counter.values == 8
