"""Compact, deterministic source for type definitions and docstrings.

The generator's own formatting spends bytes on blank lines and three-line docstrings; the
stub is read by a model, so definitions are re-rendered here: one-line class docstrings,
field descriptions as trailing comments, one key per line in functional TypedDicts.
"""

from __future__ import annotations

import ast
import re

_SPACE = re.compile(r"\s+")
_QUOTE_RUNS = re.compile(r'"{3,}')
_TRAILING_QUOTES = re.compile(r'"+$')


def one_line(text: str) -> str:
    """Collapse all whitespace (descriptions may be multi-line) to single spaces."""
    return _SPACE.sub(" ", text).strip()


def printable(text: str) -> str:
    """``text`` with every non-printable character (NUL, other controls, lone surrogates,
    line separators) written as a backslash escape, so it can sit in a comment or, with
    backslashes escaped first, in a string literal of valid source."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def docstring(lines: list[str], indent: str) -> str:
    """A triple-quoted docstring whose value is ``lines`` (joined, indented), whatever they
    hold: backslashes, quotes and non-printable characters are escaped."""
    escaped = "\n".join(printable(line.replace("\\", "\\\\")) for line in lines)
    # Inside '''"""''' only three quotes in a row end the string, or, on one line, a quote
    # just before the closing ones: escape each quote of such a run (it is still a quote).
    if len(lines) == 1:
        escaped = _TRAILING_QUOTES.sub(_escape_quotes, escaped)
    escaped = _QUOTE_RUNS.sub(_escape_quotes, escaped)
    first, *rest = escaped.split("\n")
    if not rest:
        return f'{indent}"""{first}"""\n'
    body = "".join(f"{indent}{line}\n" if line else "\n" for line in rest)
    return f'{indent}"""{first}\n{body}{indent}"""\n'


def _escape_quotes(run: re.Match[str]) -> str:
    return '\\"' * len(run.group())


def comment(text: str) -> str:
    return "# " + printable(one_line(text))


def _docstring_text(stmt: ast.stmt) -> str | None:
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    ):
        return one_line(stmt.value.value)
    return None


def render_definition(stmt: ast.stmt) -> str:
    """Source of one top-level type definition, ending in a newline."""
    if isinstance(stmt, ast.ClassDef):
        return _render_class(stmt)
    if (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and len(stmt.value.args) == 2
        and isinstance(stmt.value.args[1], ast.Dict)
    ):
        call = stmt.value
        keys = call.args[1]
        assert isinstance(keys, ast.Dict)
        items = "".join(
            f"    {ast.unparse(k) if k is not None else '**'}: {ast.unparse(v)},\n"
            for k, v in zip(keys.keys, keys.values, strict=True)
        )
        extra = "".join(f", {ast.unparse(k)}" for k in call.keywords)
        target = ast.unparse(stmt.targets[0])
        return f"{target} = TypedDict({ast.unparse(call.args[0])}, {{\n{items}}}{extra})\n"
    return ast.unparse(stmt) + "\n"


def _render_class(stmt: ast.ClassDef) -> str:
    bases = [ast.unparse(b) for b in stmt.bases] + [ast.unparse(k) for k in stmt.keywords]
    out = [f"class {stmt.name}({', '.join(bases)}):\n"]
    body = list(stmt.body)
    if body and (doc := _docstring_text(body[0])) is not None:
        if doc:
            out.append(docstring([doc], "    "))
        body = body[1:]
    fields = 0
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign):
            line = f"    {ast.unparse(node.target)}: {ast.unparse(node.annotation)}"
            following = body[i + 1] if i + 1 < len(body) else None
            doc = _docstring_text(following) if following is not None else None
            out.append(f"{line}  {comment(doc)}\n" if doc else line + "\n")
            fields += 1
    if not fields and len(out) == 1:
        out.append("    ...\n")
    return "".join(out)
