"""Content blocks in the shapes model APIs take: ``ptc.content.to_anthropic(blocks)`` and
``ptc.content.to_openai(blocks)``.

ptc's content blocks are MCP-shaped (``{"type": "text", "text": ...}``, ``{"type": "image",
"data": <base64>, "mimeType": ...}``, ``audio``, ``resource``, ``resource_link``). A tool
result in an Anthropic ``tool_result`` block or an OpenAI message wants its own shapes;
these functions convert a result's ``content`` (or any list of blocks) to them. What an API
cannot carry becomes a text block that says what it was, never silently nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ._results import ContentBlock

__all__ = ("to_anthropic", "to_openai")

_ANTHROPIC_IMAGES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_OPENAI_AUDIO: Final = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3"}


def to_anthropic(blocks: Iterable[ContentBlock]) -> list[dict[str, Any]]:
    """Anthropic Messages content blocks: ``text`` as is, ``image`` (JPEG, PNG, GIF, WebP)
    as a base64 image source, a text ``resource`` as its text; anything else as a text
    block describing it."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        mime = block.get("mimeType")
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image" and mime in _ANTHROPIC_IMAGES and isinstance(block.get("data"), str):
            source = {"type": "base64", "media_type": mime, "data": block["data"]}
            out.append({"type": "image", "source": source})
        else:
            out.append({"type": "text", "text": _resource_text(block) or _describe(block)})
    return out


def to_openai(blocks: Iterable[ContentBlock]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions content parts: ``text`` as is, ``image`` as an ``image_url``
    data URL, WAV or MP3 ``audio`` as ``input_audio``, a text ``resource`` as its text;
    anything else as a text part describing it."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        data = block.get("data")
        mime = block.get("mimeType")
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image" and isinstance(data, str) and isinstance(mime, str):
            out.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}})
        elif kind == "audio" and isinstance(data, str) and mime in _OPENAI_AUDIO:
            audio = {"data": data, "format": _OPENAI_AUDIO[str(mime)]}
            out.append({"type": "input_audio", "input_audio": audio})
        else:
            out.append({"type": "text", "text": _resource_text(block) or _describe(block)})
    return out


def _resource_text(block: Mapping[str, Any]) -> str | None:
    """The text of an embedded text resource (``{"type": "resource", "resource": {"text"}}``)."""
    if block.get("type") != "resource":
        return None
    resource = block.get("resource")
    text = resource.get("text") if isinstance(resource, Mapping) else None
    return text if isinstance(text, str) else None


def _describe(block: Mapping[str, Any]) -> str:
    """A one-line stand-in for a block the API cannot carry (binary data left out)."""
    shown = {k: v for k, v in block.items() if k not in ("data", "blob")}
    resource = shown.get("resource")
    if isinstance(resource, dict):
        shown["resource"] = {k: v for k, v in resource.items() if k != "blob"}
    return f"[{block.get('type', 'content')} block: {json.dumps(shown, sort_keys=True)}]"
