"""A host script (run in an environment, not imported): ``run_code`` for each program.

``sys.argv[1]`` is a JSON file: ``{"programs": [...], "containment": {...} | null, "limits":
{...} | null, "profile": "python"}`` (``ptc.Containment`` / ``ptc.Limits`` keyword arguments).
Prints ``{"results": [ToolResult as JSON, ...], "probe": {dimension: {level, mechanism, gap}}}``
where ``probe`` is what ``SubprocessBackend(containment).probe()`` predicts here. Uses ptc's
public API only, as an agent host would.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import anyio

import ptc
import worker


def plain(value: Any) -> Any:
    """A frozen ptc value as plain JSON."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def as_json(result: ptc.ToolResult) -> dict[str, Any]:
    error = result.error
    return {
        "is_error": result.is_error,
        "error": None if error is None else {"code": error.code, "message": error.message},
        "value": plain(result.value),
        "meta": plain(result.meta),
    }


async def main(options: dict[str, Any]) -> dict[str, Any]:
    c = options["containment"]
    containment = ptc.Containment() if c is None else ptc.Containment(**c)
    limits = None if options["limits"] is None else ptc.Limits(**options["limits"])
    probe = {
        dim: {"level": e.level, "mechanism": e.mechanism, "gap": e.gap}
        for dim, e in worker.SubprocessBackend(containment).probe().items()
    }
    async with ptc.ToolRuntime(
        default_mode="code", containment=containment, limits=limits, profile=options["profile"]
    ) as runtime:
        results = [as_json(await runtime.root.run_code(p)) for p in options["programs"]]
    return {"results": results, "probe": probe}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        inputs = json.load(fh)
    if inputs["containment"] is not None:
        inputs["containment"]["require"] = frozenset(inputs["containment"]["require"])
    print(json.dumps(anyio.run(main, inputs)))
