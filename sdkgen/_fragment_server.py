"""The helper process's side of :mod:`sdkgen._fragment_service`: generate SDKs on request.

Read one JSON request per line on stdin (``{"fragments": [{"spec": {...}, "prefix": str},
...]}``), write one reply per line on stdout (``{"ok": true, "fragments": [...]}``, in the
request's order, or ``{"ok": false, "error": str}``),
until stdin closes. Its :class:`~sdkgen.SdkGenerator` keeps fragments in memory and in the
disk cache the host reads.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._fragment_service import MAX_LINE
from ._generator import SdkGenerator
from ._types import ToolSpec

__all__ = ("serve",)


def serve(cache_dir: str | None) -> None:
    """The helper's loop: a request line in, a reply line out, until stdin closes."""
    generator = SdkGenerator(Path(cache_dir) if cache_dir else None)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline(MAX_LINE)
        if not line:
            return
        try:
            request = json.loads(line)
            made = [
                generator.fragment(ToolSpec(**item["spec"]), item["prefix"])
                for item in request["fragments"]
            ]
            reply: dict[str, Any] = {"ok": True, "fragments": [asdict(f) for f in made]}
        except Exception as exc:  # noqa: BLE001 - reported to the host, which falls back
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        stdout.write(json.dumps(reply).encode() + b"\n")
        stdout.flush()
