"""One tool's types: JSON Schema -> TypedDict source via datamodel-code-generator.

The generator runs once per (schema, prefix) and is slow (the first call in a process takes
about a second), so its output is reduced here to a small, cacheable :class:`TypeFragment`:
the definitions the stub needs, one annotation per input property and the return
annotation. Anything the generator cannot handle degrades to the ``JSON`` alias with a
note; this module never raises for a schema.
"""

from __future__ import annotations

import ast
import json
import threading
import unicodedata
import warnings
from collections.abc import Mapping
from typing import Any

from ._ast_parse import parse
from ._dialect import for_typing, is_any
from ._fragment import JSON_ALIAS, TypeFragment
from ._render_types import render_definition
from ._type_ast import (
    TYPING_OK,
    bound_name,
    empty_typeddicts_to_mappings,
    names_in,
    open_typeddicts,
    prefix_names,
    reachable,
    typeddict_fields,
    typing_refs,
    used_names,
    widen_inputs,
)

# datamodel-code-generator keeps process-global state; one generation at a time.
_GENERATE_LOCK = threading.Lock()


def build_fragment(
    input_schema: Mapping[str, Any], output_schema: object, prefix: str
) -> TypeFragment:
    """Generate the types of one tool whose type names all start with ``prefix``.

    An output schema that allows any value (absent, ``{}``, ``true``) is the shared
    ``JSON`` alias, never a per-tool alias."""
    notes: list[str] = []
    input_schema = for_typing(input_schema, notes, "input")
    if is_any(output_schema) or not isinstance(output_schema, Mapping):
        output_schema = None
    else:
        output_schema = for_typing(output_schema, notes, "output")
    has_params = bool(_properties(input_schema))
    want_output = output_schema is not None
    first_try: list[str] = []
    tree = _generate(input_schema if has_params else None, output_schema, prefix, first_try)
    if tree is None and not (has_params and want_output):
        notes.extend(first_try)
    elif tree is None:
        # Localise the failure: the other half may still be fine.
        tree_in = _generate(input_schema, None, prefix, notes)
        tree_out = _generate(None, output_schema, prefix, notes)
        body = (tree_in.body if tree_in else []) + (tree_out.body if tree_out else [])
        tree = ast.Module(body=body, type_ignores=[])
    return fragment_from_tree(tree, input_schema, output_schema, prefix, notes)


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else {}


def _generate(
    input_schema: Mapping[str, Any] | None,
    output_schema: Mapping[str, Any] | None,
    prefix: str,
    notes: list[str],
) -> ast.Module | None:
    if input_schema is None and output_schema is None:
        return ast.Module(body=[], type_ignores=[])
    # Imported lazily: it costs ~80 ms and pulls in black/isort/jinja2 (host side only).
    import datamodel_code_generator as dcg
    from datamodel_code_generator.format import Formatter

    tool: dict[str, Any] = {"name": prefix, "description": ""}
    # An absent input becomes an empty object; its (empty) Input class is dropped below.
    tool["inputSchema"] = dict(input_schema) if input_schema is not None else {"type": "object"}
    if output_schema is not None:
        tool["outputSchema"] = dict(output_schema)
    try:
        with _GENERATE_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            source = dcg.generate(
                [json.loads(json.dumps(tool))],
                input_file_type=dcg.InputFileType.MCPTools,
                output_model_type=dcg.DataModelType.TypingTypedDict,  # type: ignore[attr-defined]
                formatters=[Formatter.BUILTIN],
                naming_strategy=dcg.NamingStrategy.ParentPrefixed,
                enum_field_as_literal=dcg.LiteralType.All,
                disable_timestamp=True,
                use_field_description=True,
                use_schema_description=True,
            )
        if not isinstance(source, str):
            raise TypeError(f"unexpected generator result {type(source).__name__}")
        return parse(source)
    except Exception as exc:  # the generator's failure modes are open-ended
        part = "input" if output_schema is None else "output" if input_schema is None else "tool"
        notes.append(f"{part} schema not supported ({type(exc).__name__}); typed as JSON")
        return None


def fragment_from_tree(
    tree: ast.Module | None,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None,
    prefix: str,
    notes: list[str],
) -> TypeFragment:
    """The fragment of the generator's module ``tree`` (``None``: it failed) for these
    schemas (as :func:`~sdkgen._dialect.for_typing` made them): its definitions prefixed,
    opened, widened and re-rendered, only those the signatures reach."""
    typing_names: set[str] = set()
    defs: dict[str, ast.stmt] = {}
    for stmt in tree.body if tree is not None else []:
        if isinstance(stmt, ast.ImportFrom):
            if stmt.module == "__future__":
                continue
            for alias in stmt.names:
                if stmt.module in ("typing", "typing_extensions") and alias.name in TYPING_OK:
                    typing_names.add(alias.name)
                else:
                    notes.append(f"needs {stmt.module}.{alias.name}; typed as JSON")
                    return _fallback(input_schema, output_schema, notes)
        elif isinstance(stmt, ast.ClassDef | ast.Assign | ast.AnnAssign):
            name = bound_name(stmt)
            if name is None:
                notes.append("unexpected generator output; typed as JSON")
                return _fallback(input_schema, output_schema, notes)
            defs[name] = stmt
        elif not (isinstance(stmt, ast.Expr) or isinstance(stmt, ast.Import)):
            notes.append("unexpected generator output; typed as JSON")
            return _fallback(input_schema, output_schema, notes)
    prefix_names(defs, prefix)
    defs = {bound_name(stmt) or name: stmt for name, stmt in defs.items()}
    opened = open_typeddicts(defs)
    empty_typeddicts_to_mappings(defs, typing_names)
    opened &= {n for n, stmt in defs.items() if isinstance(stmt, ast.ClassDef | ast.Assign)}

    input_name, output_name = f"{prefix}Input", f"{prefix}Output"
    params = _params_from(defs.get(input_name), defs, input_schema)
    returns = JSON_ALIAS
    if output_schema is not None:
        if output_name in defs:
            returns = output_name
        elif not any(note.startswith(("output", "tool")) for note in notes):
            notes.append("output schema not supported; typed as JSON")
    params = widen_inputs(defs, params, returns, opened)
    roots = [ann for _, ann, _ in params] + [returns]
    keep = reachable(roots, defs)
    rendered = tuple(render_definition(defs[n]) for n in defs if n in keep)
    for stmt_name in keep:
        typing_names.update(typing_refs(defs[stmt_name]))
    typing_names |= TYPING_OK & set().union(*(names_in(parse(a)) for a in roots))
    typing_names &= used_names((*rendered, *roots))
    return TypeFragment(
        definitions=rendered,
        type_names=tuple(n for n in defs if n in keep),
        typing_names=tuple(sorted(typing_names)),
        params=params,
        returns=returns,
        notes=tuple(notes),
    )


def _fallback(
    input_schema: Mapping[str, Any], output_schema: Mapping[str, Any] | None, notes: list[str]
) -> TypeFragment:
    required = input_schema.get("required") if isinstance(input_schema, Mapping) else None
    required_keys = set(required) if isinstance(required, list) else set()
    params = tuple((key, JSON_ALIAS, key in required_keys) for key in _properties(input_schema))
    return TypeFragment(
        definitions=(),
        type_names=(),
        typing_names=(),
        params=params,
        returns=JSON_ALIAS,
        notes=tuple(notes),
    )


def _params_from(
    input_def: ast.stmt | None, defs: dict[str, ast.stmt], input_schema: Mapping[str, Any]
) -> tuple[tuple[str, str, bool], ...]:
    fields = typeddict_fields(input_def, defs) if input_def is not None else None
    if fields is None:
        return _fallback(input_schema, None, []).params
    # ast.parse NFKC-normalises identifiers ("\ufb00" -> "ff"): map field names back to the
    # schema's own keys, and give up on the typed form when that is ambiguous.
    keys = list(_properties(input_schema))
    originals: dict[str, list[str]] = {}
    for original in keys:
        originals.setdefault(unicodedata.normalize("NFKC", original), []).append(original)
    params = []
    for key, annotation in fields:
        if key not in keys:
            candidates = originals.get(key, [])
            if len(candidates) != 1:
                return _fallback(input_schema, None, []).params
            key = candidates[0]
        required = True
        if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
            if annotation.value.id in ("NotRequired", "Required"):
                required = annotation.value.id == "Required"
                annotation = annotation.slice
        params.append((key, ast.unparse(annotation), required))
    return tuple(params)
