"""Decision objects: positional first field, keyword-only rest, Accept's exclusivity."""

from __future__ import annotations

import dataclasses

import pytest

import ptc


def test_first_field_is_positional() -> None:
    assert ptc.Deny("why").reason == "why"
    assert ptc.Ask("sure?").reason == "sure?"
    assert ptc.Block("again").feedback == "again"
    with pytest.raises(TypeError):
        ptc.Deny("why", {"k": 1})  # type: ignore[call-arg]
    assert ptc.Deny("why", info={"k": 1}).info == {"k": 1}


def test_accept_takes_content_or_value_not_both() -> None:
    with pytest.raises(TypeError):
        ptc.Accept(content=[], value=None)
    assert ptc.Accept(value=None).has_value
    assert not ptc.Accept().has_value and ptc.Accept().content is None


def test_decisions_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ptc.Deny("x").reason = "y"  # type: ignore[misc]
