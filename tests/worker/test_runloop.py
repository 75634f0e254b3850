"""The run loop's result frames: put together from encoded parts, byte for byte what the
generic encoder writes for the same frame, and valid host frames."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests import _strategies as strategies
from worker import CallReply
from worker._host._runloop import _result_frame
from worker._protocol._framing import FrameDecoder, encode
from worker._protocol._messages import validate_host_frame

json_values = strategies.json_values(max_leaves=12)


@given(call_id=st.integers(min_value=1, max_value=2**62), value=json_values)
def test_a_success_frame_is_what_encode_writes(call_id: int, value: Any) -> None:
    data = _result_frame(call_id, CallReply.success(value))
    assert data == encode({"type": "result", "id": call_id, "ok": True, "value": value})
    (frame,) = FrameDecoder(validate_host_frame).feed(data)
    assert frame["id"] == call_id


@given(call_id=st.integers(min_value=1, max_value=2**62), code=st.text(), message=st.text())
def test_a_failure_frame_is_what_encode_writes(call_id: int, code: str, message: str) -> None:
    data = _result_frame(call_id, CallReply.failure(code, message))
    frame = {"type": "result", "id": call_id, "ok": False, "code": code, "message": message}
    assert data == encode(frame)
    assert FrameDecoder(validate_host_frame).feed(data) == [frame]


def test_a_value_that_cannot_be_sent_becomes_an_invalid_result_failure() -> None:
    data = _result_frame(3, CallReply.success(float("nan")))
    (frame,) = FrameDecoder(validate_host_frame).feed(data)
    assert frame["ok"] is False and frame["code"] == "INVALID_RESULT"
    assert frame["message"].startswith("the tool result could not be sent to the worker:")
