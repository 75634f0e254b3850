"""Identifier mapping (docs/sdk.md, "Identifiers")."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdkgen import ident_for_property, ident_for_tool, property_idents, tool_idents


@pytest.mark.parametrize(
    ("name", "ident"),
    [
        ("get-weather.v2", "get_weather_v2"),
        ("2fa_check", "t_2fa_check"),
        ("class", "class_"),
        ("list", "list_"),
        ("__proto__", "t___proto__"),
        ("", "t_"),
        ("tools", "tools_"),
        ("parallel", "parallel_"),
        ("ToolCallError", "ToolCallError_"),
        ("search", "search"),
        ("héllo", "h_llo"),
    ],
)
def test_tool_names_map_as_designed(name: str, ident: str) -> None:
    assert ident_for_tool(name) == ident


@pytest.mark.parametrize(
    ("key", "ident"),
    [("from", "from_"), ("filter", "filter"), ("2fa", "p_2fa"), ("my-key", "my_key"), ("", "p_")],
)
def test_property_keys_map_as_designed(key: str, ident: str) -> None:
    assert ident_for_property(key) == ident


def test_a_name_that_needs_no_mapping_keeps_it_and_mapped_names_get_suffixes() -> None:
    assert tool_idents(["tools", "tools_"]) == {"tools_": "tools_", "tools": "tools__2"}
    assert tool_idents(["a-b", "a.b", "a_b"]) == {"a_b": "a_b", "a-b": "a_b_2", "a.b": "a_b_3"}
    assert property_idents(["my-key", "my_key"]) == {"my_key": "my_key", "my-key": "my_key_2"}


@given(st.lists(st.text(max_size=8), max_size=8))
def test_tool_idents_are_unique_valid_and_not_reserved(names: list[str]) -> None:
    idents = tool_idents(names)
    assert set(idents) == set(names)
    values = list(idents.values())
    assert len(set(values)) == len(values)
    for ident in values:
        assert ident.isidentifier() and ident.isascii()
        assert not keyword.iskeyword(ident) and not ident.startswith("_")
        assert ident not in {"tools", "parallel", "ToolCallError", "list", "print"}


@given(st.lists(st.text(max_size=8), max_size=8))
def test_property_idents_are_unique_valid_keywords(keys: list[str]) -> None:
    idents = property_idents(keys)
    values = list(idents.values())
    assert len(set(values)) == len(values)
    assert all(v.isidentifier() and not keyword.iskeyword(v) for v in values)
