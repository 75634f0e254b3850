"""Lossless materialisation and deep-frozen JSON."""

from __future__ import annotations

import copy
import json
import math
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptc
from ptc import FrozenDict, FrozenList, NotJSONError
from ptc._json import freeze, thaw

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)

non_json_leaves = st.one_of(
    st.just(math.nan),
    st.just(math.inf),
    st.just(-math.inf),
    st.tuples(st.integers()),
    st.frozensets(st.integers(), max_size=2),
    st.binary(max_size=3),
    st.builds(object),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
)


@given(json_values)
def test_materialisation_round_trips_every_json_value(value: Any) -> None:
    frozen = freeze(value)
    assert frozen == value
    assert json.loads(json.dumps(frozen)) == value
    assert thaw(frozen) == value


@given(json_values, non_json_leaves)
def test_materialisation_rejects_every_non_json_value(value: Any, bad: Any) -> None:
    with pytest.raises(NotJSONError):
        freeze({"wrapper": [value, bad]})
    with pytest.raises(NotJSONError):
        freeze(bad)


@pytest.mark.parametrize("key", [1, 1.5, None, True, ("a",)])
def test_non_string_keys_are_rejected_with_a_path(key: Any) -> None:
    with pytest.raises(NotJSONError) as info:
        freeze({"outer": {key: 1}})
    assert info.value.path == "$.outer"


def test_the_error_names_the_json_path() -> None:
    with pytest.raises(NotJSONError, match=r"\$\.items\[1\]"):
        freeze({"items": [1, math.nan]})


@given(
    st.lists(st.one_of(st.text(max_size=3), st.integers(0, 2)), max_size=6),
    st.sampled_from(["$", "$.meta"]),
)
def test_the_error_path_is_where_the_bad_value_sits(keys: list[str | int], root: str) -> None:
    # Paths are made only for an error, from links: the text must be what each level adds.
    value: Any = {1, 2}
    expected = root
    for key in keys:
        expected += f".{key}" if isinstance(key, str) else f"[{key}]"
    for key in reversed(keys):
        value = {key: value} if isinstance(key, str) else [None] * key + [value]
    with pytest.raises(NotJSONError) as info:
        freeze(value, root)
    assert info.value.path == expected


MUTATIONS_DICT = [
    lambda d: d.__setitem__("x", 1),
    lambda d: d.__delitem__("a"),
    lambda d: d.update(x=1),
    lambda d: d.pop("a"),
    lambda d: d.popitem(),
    lambda d: d.setdefault("x", 1),
    lambda d: d.clear(),
    lambda d: d.__ior__({"x": 1}),
    lambda d: d.__init__({"x": 1}),
    lambda d: setattr(d, "__class__", dict),
]
MUTATIONS_LIST = [
    lambda items: items.append(1),
    lambda items: items.extend([1]),
    lambda items: items.insert(0, 1),
    lambda items: items.pop(),
    lambda items: items.remove(1),
    lambda items: items.clear(),
    lambda items: items.sort(),
    lambda items: items.reverse(),
    lambda items: items.__setitem__(0, 2),
    lambda items: items.__delitem__(0),
    lambda items: items.__iadd__([1]),
    lambda items: items.__imul__(2),
    lambda items: items.__init__([9]),
]


@pytest.mark.parametrize("mutate", MUTATIONS_DICT)
def test_every_dict_mutation_raises_type_error(mutate: Any) -> None:
    frozen = freeze({"a": [1, 2]})
    with pytest.raises(TypeError):
        mutate(frozen)
    assert frozen == {"a": [1, 2]}


@pytest.mark.parametrize("mutate", MUTATIONS_LIST)
def test_every_list_mutation_raises_type_error(mutate: Any) -> None:
    frozen = freeze([1, 2])
    with pytest.raises(TypeError):
        mutate(frozen)
    assert frozen == [1, 2]


def test_frozen_containers_behave_like_plain_json() -> None:
    frozen = freeze({"a": [1, {"b": None}]})
    assert isinstance(frozen, dict) and isinstance(frozen, FrozenDict)
    assert isinstance(frozen["a"], list) and isinstance(frozen["a"], FrozenList)
    assert json.dumps(frozen) == '{"a": [1, {"b": null}]}'
    assert copy.deepcopy(frozen) is frozen
    assert pickle.loads(pickle.dumps(frozen)) == frozen


def test_freeze_copies_so_the_source_can_change_independently() -> None:
    source = {"a": [1]}
    frozen = freeze(source)
    source["a"].append(2)
    assert frozen == {"a": [1]}


def test_thaw_returns_an_independent_mutable_copy() -> None:
    thawed: Any = thaw(freeze({"a": [1]}))
    thawed["a"].append(2)
    assert type(thawed) is dict and thawed == {"a": [1, 2]}


def test_absurdly_deep_values_are_refused_clearly_not_with_a_recursion_error() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(NotJSONError, match="nested deeper than 200 levels"):
        freeze(deep)
    ok: Any = 0
    for _ in range(199):
        ok = {"k": ok}
    assert freeze(ok) == ok


@pytest.mark.anyio
async def test_a_deep_argument_is_invalid_args_not_an_exception() -> None:
    runtime = ptc.ToolRuntime()

    @runtime.tool
    def echo(x: Any) -> Any:
        """Echo."""
        return x

    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    result = await runtime.root.call("echo", {"x": deep})
    assert result.error is not None and result.error.code == "INVALID_ARGS"
    assert "nested deeper than 200 levels" in result.error.message


def test_a_whole_result_thaws_to_plain_json() -> None:
    # ptc.thaw and ToolResult.as_json: the one way frozen values become plain ones (the CLI's
    # --json, the LangChain artifact and the MCP conversion all use them).
    import json

    import ptc

    result = ptc.ToolResult(
        call_id="c1",
        name="t",
        is_error=False,
        content=freeze([{"type": "text", "text": "hi"}]),  # type: ignore[arg-type]
        value=freeze({"rows": [1, 2]}),
        meta=freeze({"stats": {"calls": 1}}),  # type: ignore[arg-type]
        additional_contexts=(freeze({"k": [True]}),),
    )
    plain = result.as_json()
    assert plain == {
        "call_id": "c1",
        "name": "t",
        "is_error": False,
        "content": [{"type": "text", "text": "hi"}],
        "value": {"rows": [1, 2]},
        "error": None,
        "meta": {"stats": {"calls": 1}},
        "additional_contexts": [{"k": [True]}],
    }
    assert json.loads(json.dumps(plain)) == plain
    assert type(plain["meta"]) is dict and type(plain["content"]) is list
    assert ptc.thaw is thaw
def test_freezing_frozen_parts_keeps_them_and_still_checks_what_it_must() -> None:
    part = freeze({"a": [1, {"b": 2}]})
    whole = freeze({"log": [part, part]})
    assert isinstance(whole, dict) and isinstance(whole["log"], list)
    assert whole["log"][0] is part  # checked and immutable already: not copied again
    # One built by hand was never checked: it is copied, and refused if it is not JSON.
    with pytest.raises(NotJSONError, match="not a JSON number"):
        freeze({"x": FrozenDict({"y": float("nan")})})
    # A frozen part still counts towards the depth where it is put.
    deep: object = 1
    for _ in range(150):
        deep = [deep]
    tall = freeze(deep)
    shallow: object = tall
    for _ in range(50):
        shallow = [shallow]
    assert freeze(shallow) == shallow  # 50 + 150 levels: MAX_DEPTH exactly
    with pytest.raises(NotJSONError, match="nested deeper"):
        freeze([shallow])
