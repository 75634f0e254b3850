"""``ptc.content``: content blocks in Anthropic's and OpenAI's shapes; ``ToolResult.text``."""

from __future__ import annotations

from typing import Any

import pytest

import ptc
from ptc.content import to_anthropic, to_openai

PNG = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


def test_text_blocks_keep_their_text_in_both_shapes() -> None:
    blocks = [{"type": "text", "text": "hello"}]
    assert to_anthropic(blocks) == [{"type": "text", "text": "hello"}]
    assert to_openai(blocks) == [{"type": "text", "text": "hello"}]


def test_an_image_becomes_a_base64_source_or_a_data_url() -> None:
    assert to_anthropic([PNG]) == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        }
    ]
    assert to_openai([PNG]) == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    ]


def test_wav_audio_is_input_audio_for_openai() -> None:
    audio = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
    assert to_openai([audio]) == [
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    ]


@pytest.mark.parametrize("convert", [to_anthropic, to_openai])
def test_a_text_resource_is_its_text(convert: Any) -> None:
    block = {"type": "resource", "resource": {"uri": "file:///a.md", "text": "# A"}}
    assert convert([block]) == [{"type": "text", "text": "# A"}]


@pytest.mark.parametrize(
    ("convert", "block"),
    [
        (to_anthropic, {"type": "image", "data": "AAAA", "mimeType": "image/tiff"}),
        (to_anthropic, {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}),
        (to_openai, {"type": "audio", "data": "AAAA", "mimeType": "audio/ogg"}),
        (to_openai, {"type": "resource_link", "uri": "file:///x", "name": "x"}),
        (to_anthropic, {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA"}}),
    ],
)
def test_what_an_api_cannot_carry_is_described_without_its_data(
    convert: Any, block: dict[str, Any]
) -> None:
    (out,) = convert([block])
    assert out["type"] == "text" and out["text"].startswith(f"[{block['type']} block:")
    assert "AAAA" not in out["text"]


def test_tool_result_text_joins_the_text_blocks_only() -> None:
    result = ptc.ToolResult(
        call_id="c",
        name="t",
        is_error=False,
        content=[{"type": "text", "text": "a"}, PNG, {"type": "text", "text": "b"}],
    )
    assert result.text == "a\nb"
    assert ptc.ToolResult(call_id="c", name="t", is_error=False, content=[]).text == ""
