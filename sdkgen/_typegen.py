"""One tool's types: JSON Schema -> TypedDict source via datamodel-code-generator.

The generator runs once per (schema, prefix) and is slow (the first call in a process takes
about a second), so its output is reduced here to a small, cacheable :class:`TypeFragment`:
the definitions the stub needs, one annotation per input property and the return
annotation. Anything the generator cannot handle degrades to the ``JSON`` alias with a
note; this module never raises for a schema.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import threading
import tokenize
import typing
import unicodedata
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._dialect import for_typing, is_any
from ._render_types import render_definition

JSON_ALIAS = "JSON"
# Names every stub defines or imports itself; a fragment may not redefine them.
_TYPING_OK = frozenset(name for name in dir(typing) if not name.startswith("_"))
# datamodel-code-generator keeps process-global state; one generation at a time.
_GENERATE_LOCK = threading.Lock()
_LINE_STARTS = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT)


@dataclass(frozen=True, kw_only=True)
class TypeFragment:
    """The typed face of one tool, ready to be placed into an SDK."""

    definitions: tuple[str, ...]
    """Stub source of the supporting types, in dependency-safe (generator) order."""
    type_names: tuple[str, ...]
    """Names the definitions bind (all start with the tool's prefix)."""
    typing_names: tuple[str, ...]
    """Names the definitions need from ``typing``."""
    params: tuple[tuple[str, str, bool], ...]
    """``(original key, annotation, required)`` per input property, in schema order."""
    returns: str
    notes: tuple[str, ...]
    """Why something fell back to ``JSON`` (rendered as comments)."""


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
    return _reduce(tree, input_schema, output_schema, prefix, notes)


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
        return ast.parse(source)
    except Exception as exc:  # the generator's failure modes are open-ended
        part = "input" if output_schema is None else "output" if input_schema is None else "tool"
        notes.append(f"{part} schema not supported ({type(exc).__name__}); typed as JSON")
        return None


def _reduce(
    tree: ast.Module | None,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None,
    prefix: str,
    notes: list[str],
) -> TypeFragment:
    typing_names: set[str] = set()
    defs: dict[str, ast.stmt] = {}
    for stmt in tree.body if tree is not None else []:
        if isinstance(stmt, ast.ImportFrom):
            if stmt.module == "__future__":
                continue
            for alias in stmt.names:
                if stmt.module in ("typing", "typing_extensions") and alias.name in _TYPING_OK:
                    typing_names.add(alias.name)
                else:
                    notes.append(f"needs {stmt.module}.{alias.name}; typed as JSON")
                    return _fallback(input_schema, output_schema, notes)
        elif isinstance(stmt, ast.ClassDef | ast.Assign | ast.AnnAssign):
            name = _bound_name(stmt)
            if name is None:
                notes.append("unexpected generator output; typed as JSON")
                return _fallback(input_schema, output_schema, notes)
            defs[name] = stmt
        elif not (isinstance(stmt, ast.Expr) or isinstance(stmt, ast.Import)):
            notes.append("unexpected generator output; typed as JSON")
            return _fallback(input_schema, output_schema, notes)
    _prefix_names(defs, prefix)
    defs = {_bound_name(stmt) or name: stmt for name, stmt in defs.items()}
    opened = _open_typeddicts(defs)
    _empty_typeddicts_to_mappings(defs, typing_names)
    opened &= {n for n, stmt in defs.items() if isinstance(stmt, ast.ClassDef | ast.Assign)}

    input_name, output_name = f"{prefix}Input", f"{prefix}Output"
    params = _params_from(defs.get(input_name), defs, input_schema)
    returns = JSON_ALIAS
    if output_schema is not None:
        if output_name in defs:
            returns = output_name
        elif not any(note.startswith(("output", "tool")) for note in notes):
            notes.append("output schema not supported; typed as JSON")
    params = _widen_inputs(defs, params, returns, opened)
    roots = [ann for _, ann, _ in params] + [returns]
    keep = _reachable(roots, defs)
    rendered = tuple(render_definition(defs[n]) for n in defs if n in keep)
    for stmt_name in keep:
        typing_names.update(_typing_refs(defs[stmt_name]))
    typing_names |= _TYPING_OK & set().union(*(_names_in(ast.parse(a)) for a in roots))
    typing_names &= _used_names((*rendered, *roots))
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


def _bound_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.ClassDef):
        return stmt.name
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None


def _prefix_names(defs: dict[str, ast.stmt], prefix: str) -> None:
    """Give every definition the tool's prefix so fragments of different tools never clash
    (``$defs``/``allOf`` models may come out unprefixed)."""
    renames = {n: prefix + n for n in defs if not n.startswith(prefix)}
    if not renames:
        return
    for stmt in defs.values():
        if isinstance(stmt, ast.ClassDef):
            stmt.name = renames.get(stmt.name, stmt.name)
            # Field names are keys, not references: rename only inside annotations/bases.
            roots: list[ast.AST] = [*stmt.bases, *(f.annotation for f in _class_fields(stmt))]
        else:
            roots = [stmt]
        for node in (n for root in roots for n in ast.walk(root)):
            if isinstance(node, ast.Name) and node.id in renames:
                node.id = renames[node.id]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "TypedDict"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in renames
            ):
                node.args[0].value = renames[node.args[0].value]


def _open_typeddicts(defs: dict[str, ast.stmt]) -> set[str]:
    """TypedDicts whose object schema accepts other keys. The generator marks the others
    ``closed=True`` and typed extra keys ``extra_items=...`` (PEP 728, which mypy does not
    read yet): both keywords are dropped here."""
    opened = set()
    for name, stmt in defs.items():
        if isinstance(stmt, ast.ClassDef):
            keywords = stmt.keywords
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            keywords = stmt.value.keywords
        else:
            continue
        closed = any(
            k.arg == "closed" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in keywords
        )
        keywords[:] = [k for k in keywords if k.arg not in ("closed", "extra_items")]
        if not closed:
            opened.add(name)
    return opened


def _widen_inputs(
    defs: dict[str, ast.stmt],
    params: tuple[tuple[str, str, bool], ...],
    returns: str,
    opened: set[str],
) -> tuple[tuple[str, str, bool], ...]:
    """Where an argument may be an open object, accept any JSON object too (``T | dict[str,
    JSON]``): a TypedDict would make a type checker reject keys the host accepts. Types that
    outputs use as well are left as they are (reading a value stays typed)."""
    if not opened:
        return params
    inputs = _reachable([a for _, a, _ in params], defs)
    only_inputs = inputs - _reachable([returns], defs)
    widen = _Widen(opened)
    for name in only_inputs:
        stmt = defs[name]
        if isinstance(stmt, ast.ClassDef):
            for field in _class_fields(stmt):
                field.annotation = widen.visit(field.annotation)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            call = stmt.value
            if isinstance(call, ast.Call) and len(call.args) == 2:
                call.args[1] = widen.visit(call.args[1])  # functional TypedDict: the values
            else:
                stmt.value = widen.visit(stmt.value)
    return tuple(
        (key, ast.unparse(widen.visit(ast.parse(annotation, mode="eval").body)), required)
        for key, annotation, required in params
    )


class _Widen(ast.NodeTransformer):
    def __init__(self, opened: set[str]) -> None:
        self.opened = opened

    def _either(self, name: str) -> ast.expr:
        mapping = ast.parse(f"dict[str, {JSON_ALIAS}]", mode="eval").body
        return ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=ast.BitOr(), right=mapping)

    def visit_Name(self, node: ast.Name) -> ast.expr:  # noqa: N802 - ast.NodeTransformer API
        return self._either(node.id) if node.id in self.opened else node

    def visit_Constant(self, node: ast.Constant) -> ast.expr:  # noqa: N802
        # A quoted forward reference (a stub needs no quotes).
        if isinstance(node.value, str) and node.value in self.opened:
            return self._either(node.value)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:  # noqa: N802
        if isinstance(node.value, ast.Name) and node.value.id == "Literal":
            return node  # values, not references
        self.generic_visit(node)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.expr:  # noqa: N802
        # Functional TypedDict: keys are field names (strings), never references.
        node.values = [self.visit(v) for v in node.values]
        return node


def _empty_typeddicts_to_mappings(defs: dict[str, ast.stmt], typing_names: set[str]) -> None:
    """A TypedDict without fields would only admit ``{}``; an open object is a mapping."""
    for name, stmt in list(defs.items()):
        if isinstance(stmt, ast.ClassDef) and not _class_fields(stmt) and not stmt.bases[1:]:
            defs[name] = ast.parse(f"{name}: TypeAlias = dict[str, {JSON_ALIAS}]").body[0]
            typing_names.add("TypeAlias")


def _class_fields(stmt: ast.ClassDef) -> list[ast.AnnAssign]:
    return [s for s in stmt.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def _params_from(
    input_def: ast.stmt | None, defs: dict[str, ast.stmt], input_schema: Mapping[str, Any]
) -> tuple[tuple[str, str, bool], ...]:
    fields = _typeddict_fields(input_def, defs) if input_def is not None else None
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


def _typeddict_fields(
    stmt: ast.stmt, defs: dict[str, ast.stmt]
) -> list[tuple[str, ast.expr]] | None:
    if isinstance(stmt, ast.ClassDef):
        fields: list[tuple[str, ast.expr]] = []
        for base in stmt.bases:
            if isinstance(base, ast.Name) and base.id != "TypedDict":
                inherited = defs.get(base.id)
                sub = _typeddict_fields(inherited, defs) if inherited is not None else None
                if sub is None:
                    return None
                fields.extend(sub)
        total = all(
            not (k.arg == "total" and isinstance(k.value, ast.Constant) and k.value.value is False)
            for k in stmt.keywords
        )
        for field in _class_fields(stmt):
            assert isinstance(field.target, ast.Name)
            ann = field.annotation
            if not total:
                ann = ast.Subscript(value=ast.Name(id="NotRequired"), slice=ann)
            fields.append((field.target.id, ann))
        return fields
    if (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and len(stmt.value.args) == 2
        and isinstance(stmt.value.args[1], ast.Dict)
    ):
        result = []
        for key, value in zip(stmt.value.args[1].keys, stmt.value.args[1].values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            result.append((key.value, value))
        return result
    return None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _reachable(annotations: list[str], defs: dict[str, ast.stmt]) -> set[str]:
    todo = set().union(*(_names_in(ast.parse(a, mode="eval")) for a in annotations))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        todo |= _names_in(defs[name])
    return seen


def _typing_refs(stmt: ast.stmt) -> set[str]:
    return {n for n in _names_in(stmt) if n in _TYPING_OK}


def _used_names(sources: tuple[str, ...]) -> set[str]:
    used: set[str] = set()
    for source in sources:
        used |= _names_in(ast.parse(source))
    return used


def rename_prefix(fragment: TypeFragment, old: str, new: str) -> TypeFragment:
    """The same fragment with every type name's prefix ``old`` replaced by ``new``.

    Used at assembly when two tools' type names would clash, so the clash never costs a
    generator call. Works on tokens of the rendered text (comments survive); a field
    name (an indented name followed by ``:``) is a key, not a reference, and is kept.
    """
    renames = {n: new + n[len(old) :] for n in fragment.type_names}

    def rename(source: str) -> str:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        out = []
        for i, tok in enumerate(tokens):
            text = tok.string
            nxt = tokens[i + 1].string if i + 1 < len(tokens) else ""
            line_start = i == 0 or tokens[i - 1].type in _LINE_STARTS
            is_field = line_start and tok.start[1] > 0 and nxt == ":"
            if tok.type == tokenize.NAME and text in renames and not is_field:
                text = renames[text]
            elif tok.type == tokenize.STRING and text[1:-1] in renames and text[0] in "'\"":
                text = text[0] + renames[text[1:-1]] + text[-1]
            out.append(tok._replace(string=text))
        return tokenize.untokenize(out)

    return dataclasses.replace(
        fragment,
        definitions=tuple(rename(d) for d in fragment.definitions),
        type_names=tuple(renames.values()),
        params=tuple((k, rename(a).strip(), r) for k, a, r in fragment.params),
        returns=rename(fragment.returns).strip(),
    )
