"""Which request a line answers when ptc will not parse it (too large, or broken): found from
the line's two ends alone, whatever the key order, never from an ``id`` nested inside."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptc.mcp._wire import attributed_id, parse_message

EDGE = 4096
ids = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=20))
values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def ends(line: bytes) -> tuple[bytes, bytes]:
    return line[:EDGE], line[-EDGE:]


@settings(max_examples=300)
@given(request_id=ids, result=st.dictionaries(st.text(max_size=8), values, max_size=5),
       id_last=st.booleans(), padding=st.integers(0, 3 * EDGE))  # fmt: skip
def test_the_top_level_id_is_found_in_either_key_order(
    request_id: int | str, result: dict[str, Any], id_last: bool, padding: int
) -> None:
    result = {**result, "pad": "x" * padding, "id": "a nested id is not the request's"}
    message = (
        {"result": result, "jsonrpc": "2.0", "id": request_id}
        if id_last
        else {"jsonrpc": "2.0", "id": request_id, "result": result}
    )
    line = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert attributed_id(*ends(line)) == request_id


@given(result=values)
def test_a_line_without_a_top_level_id_names_no_request(result: Any) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"v": result}}
    line = json.dumps(notification).encode()
    assert attributed_id(*ends(line)) is None
    assert attributed_id(b"not json at all", b'"id": 3}') is None  # not an object


def test_invalid_utf8_in_a_message_is_replaced() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\xffb"}]}}'
    message = parse_message(line, lambda request_id: False)
    assert message.result["content"][0]["text"] == "a\ufffdb"  # type: ignore[union-attr]


@pytest.mark.parametrize("enabled", [True, False])
def test_a_parse_leaves_the_collector_as_the_host_set_it(enabled: bool) -> None:
    # The collector is one per process: a parse that paused it paused it for every thread.
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": {"rows": [[] for _ in range(20_000)]}}
    ).encode()
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    was, thresholds = gc.isenabled(), gc.get_threshold()
    gc.collect()  # a young generation that starts empty, at CPython's default thresholds,
    gc.set_threshold(700, 10, 10)  # whatever this test process was left with before
    gc.callbacks.append(seen)
    (gc.enable if enabled else gc.disable)()
    try:
        message = parse_message(line, lambda request_id: False)
        assert gc.isenabled() is enabled
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)
        (gc.enable if was else gc.disable)()
    assert len(message.result["rows"]) == 20_000  # type: ignore[union-attr]
    assert bool(collections) is enabled  # its allocations set off collections when enabled
