"""What a schema must be before ptc builds a validator from it (DESIGN section 6).

Each check returns problems as ``(path, message)`` pairs instead of raising, so that
:func:`ptc._schema._validator.compile_schema` can report every problem at once:

- :func:`shape_problems`: plain JSON, at most :data:`MAX_SCHEMA_DEPTH` levels and
  :data:`MAX_SCHEMA_BYTES` bytes; walked without recursion, so a schema nested thousands
  of levels deep is a clear problem instead of a ``RecursionError``.
- :func:`dialect_of`: the ``$schema`` a schema declares (draft-04 to 2020-12).
- :func:`reference_problems`: every ``$ref`` / ``$dynamicRef`` / ``$recursiveRef`` points
  inside the same schema (``#...``) and resolves there, and no chain of references and
  in-place applicators (``allOf``, ``not``, ...) loops without descending into the value.
  Lookups go through a :class:`referencing.Registry` that refuses retrieval: nothing here
  touches the network or the filesystem.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn
from urllib.parse import unquote

import referencing.jsonschema
from jsonschema import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
)
from referencing import Registry
from referencing.exceptions import NoSuchResource

__all__ = (
    "DIALECTS",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "Path",
    "Problem",
    "dialect_of",
    "format_path",
    "offline_registry",
    "pointer",
    "reference_problems",
    "shape_problems",
    "size_problem",
)

MAX_SCHEMA_DEPTH = 64
"""Levels of JSON nesting (objects and arrays) a schema may have."""
MAX_SCHEMA_BYTES = 1 << 20
"""Size of a schema as compact JSON (UTF-8)."""

Path = tuple[str | int, ...]
Problem = tuple[Path, str]

# --- dialects ---------------------------------------------------------------------------

DIALECTS: dict[str, Any] = {
    "draft-04": Draft4Validator,
    "draft-06": Draft6Validator,
    "draft-07": Draft7Validator,
    "2019-09": Draft201909Validator,
    "2020-12": Draft202012Validator,
}
"""Dialect name -> jsonschema validator class; a schema without ``$schema`` is 2020-12."""
_DIALECT_URIS = {
    "json-schema.org/draft-04/schema": "draft-04",
    "json-schema.org/draft-06/schema": "draft-06",
    "json-schema.org/draft-07/schema": "draft-07",
    "json-schema.org/draft/2019-09/schema": "2019-09",
    "json-schema.org/draft/2020-12/schema": "2020-12",
}
_CANONICAL_URIS = {
    name: cls.META_SCHEMA.get("$schema", cls.META_SCHEMA.get("$id"))
    for name, cls in DIALECTS.items()
}


def dialect_of(schema: Mapping[str, Any]) -> tuple[str, Problem | None]:
    """The dialect ``schema`` declares with ``$schema`` (http or https, with or without the
    empty fragment), and a problem when it declares one ptc does not know."""
    declared = schema.get("$schema")
    if declared is None:
        return "2020-12", None
    if isinstance(declared, str):
        bare = declared.strip().removesuffix("#").removeprefix("https://").removeprefix("http://")
        name = _DIALECT_URIS.get(bare)
        if name is not None:
            return name, None
    supported = ", ".join(f"{n} ({u})" for n, u in _CANONICAL_URIS.items())
    return "2020-12", (("$schema",), f"unknown dialect {_json(declared)}; supported: {supported}")


# --- shape and limits -------------------------------------------------------------------


def size_problem(schema: object) -> Problem | None:
    """The problem of a schema larger than :data:`MAX_SCHEMA_BYTES`, or ``None`` (also for
    one that is not JSON or too deep to serialise: :func:`shape_problems` says why).

    Measured by the C serialiser before anything walks the schema in Python, so a huge
    schema costs milliseconds to refuse, not seconds."""
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SCHEMA_BYTES:
        return ((), f"{size} bytes as JSON; the limit is {MAX_SCHEMA_BYTES}")
    return None


def shape_problems(schema: object) -> list[Problem]:
    """Problems that make ``schema`` unsafe to walk or validate with: not plain JSON,
    deeper than :data:`MAX_SCHEMA_DEPTH`, larger than :data:`MAX_SCHEMA_BYTES`."""
    if (too_large := size_problem(schema)) is not None:
        return [too_large]
    problems: list[Problem] = []
    stack: list[tuple[object, Path]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict | list) and len(path) >= MAX_SCHEMA_DEPTH:
            # Reported once, where the limit is first reached; nothing deeper is looked at.
            where = pointer(path[:6]) + "/..."
            return [((), f"nested deeper than {MAX_SCHEMA_DEPTH} levels (the limit), at {where}")]
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str):
                    stack.append((child, (*path, key)))
                else:
                    problems.append((path, f"object key {key!r} is not a string"))
        elif isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(node))
        elif isinstance(node, float) and not math.isfinite(node):
            problems.append((path, f"{node!r} is not a JSON number"))
        elif not (node is None or isinstance(node, str | int | float)):
            problems.append((path, f"a {type(node).__name__} is not a JSON value"))
    return problems


# --- references -------------------------------------------------------------------------

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose subschemas apply to the *same* value: a cycle through them never ends.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
# Keywords whose values are data, never schemas.
_DATA = frozenset({"enum", "const", "default", "examples"})


def _refuse(uri: str) -> NoReturn:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs, unseen by mypy


def offline_registry() -> Registry[Any]:
    """A registry that never retrieves anything (no network, no files)."""
    return Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs alias


def _children(node: Mapping[str, Any], path: Path) -> Iterator[tuple[object, Path, bool]]:
    """Every value under ``node`` that may be a schema: ``(value, path, in_place)``.

    Known keywords are read by their meaning; an unknown keyword's value is walked too
    (a ``$ref`` may point into it), except the data keywords ``enum const default
    examples``. Over-approximating is safe: a non-local ``$ref`` anywhere is refused.
    """
    for key, value in node.items():
        if key in _DATA or key in _REF_KEYWORDS:
            continue
        here = (*path, key)
        if key in _IN_PLACE_ONE:
            yield value, here, True
        elif key in _IN_PLACE_MANY and isinstance(value, list):
            for i, item in enumerate(value):
                yield item, (*here, i), True
        elif key in _IN_PLACE_MAP and isinstance(value, dict):
            for name, item in value.items():
                yield item, (*here, name), isinstance(item, dict)
        elif key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(
            value, dict
        ):
            for name, item in value.items():
                yield item, (*here, name), False
        elif isinstance(value, dict):
            yield value, here, False
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict | list):
                    yield item, (*here, i), False


def reference_problems(schema: Mapping[str, Any], dialect: str) -> list[Problem]:
    """References that leave the schema or resolve to nothing, and in-place loops.

    ``schema`` must have passed :func:`shape_problems` (the walk is bounded by its depth).
    The schema is walked by position first, then whatever a reference reaches that the
    walk did not (a ``$ref`` may point into ``default``), so every node has its own path.
    """
    specification = referencing.jsonschema.specification_with(_CANONICAL_URIS[dialect])
    resolver = offline_registry().resolver_with_root(specification.create_resource(schema))
    problems: list[Problem] = []
    paths: dict[int, Path] = {}
    edges: dict[int, list[int]] = {}
    stack: list[tuple[object, Path, Any]] = [(schema, (), resolver)]
    reached: list[tuple[object, Path, Any]] = []
    while stack or reached:
        node, path, resolver = stack.pop() if stack else reached.pop()
        if isinstance(node, list):  # a list under an unknown keyword
            stack.extend((item, (*path, i), resolver) for i, item in enumerate(node))
            continue
        if not isinstance(node, dict) or id(node) in paths:
            continue
        paths[id(node)] = path
        out = edges[id(node)] = []
        if isinstance(node.get("$id", node.get("id")), str):
            try:
                resolver = resolver.in_subresource(specification.create_resource(node))
            except Exception:  # noqa: BLE001 - a malformed $id; the meta-schema reports it
                pass
        for keyword in _REF_KEYWORDS:
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            where = (*path, keyword)
            if not ref.startswith("#"):
                problems.append(
                    (
                        where,
                        f"{_json(ref)} points outside this schema; only local "
                        'references ("#...", within the same schema) are allowed',
                    )
                )
                continue
            try:
                resolved = resolver.lookup(ref)
            except Exception:  # noqa: BLE001 - referencing has several kinds of "nowhere"
                problems.append(
                    (where, f"{_json(ref)} does not resolve to anything in this schema")
                )
                continue
            if isinstance(resolved.contents, dict):
                out.append(id(resolved.contents))
                reached.append((resolved.contents, _pointer_path(ref, where), resolved.resolver))
        for child, child_path, in_place in _children(node, path):
            if in_place and isinstance(child, dict):
                out.append(id(child))
            stack.append((child, child_path, resolver))
    cycle = _find_cycle(edges)
    if cycle is not None:
        route = " -> ".join(pointer(paths[n]) for n in cycle)
        problems.append((paths[cycle[0]], f"a loop that never descends into the value: {route}"))
    return problems


def _pointer_path(ref: str, where: Path) -> Path:
    """The path a ``#/a/b`` reference names (``where`` for anchors)."""
    if not ref.startswith("#/"):
        return where
    parts = unquote(ref[2:]).split("/")
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in parts)


def pointer(path: Path) -> str:
    """``#/properties/q`` for a path (a JSON Pointer in a URI fragment, as in ``$ref``)."""
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _find_cycle(edges: dict[int, list[int]]) -> list[int] | None:
    """A cycle in ``edges`` (first node repeated at the end), found without recursion."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path = [start]
        iters = [iter(edges.get(start, ()))]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(edges.get(nxt, ())))
    return None


# --- formatting -------------------------------------------------------------------------


def format_path(path: Path) -> str:
    """``.properties.q.type`` / ``.items[0]`` / ``["a b"]``."""
    out = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part and all(ch.isalnum() or ch in "_$@-" for ch in part):
            out.append(f".{part}")
        else:
            out.append(f"[{_json(part)}]")
    return "".join(out)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)
