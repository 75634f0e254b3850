"""The typed face of one tool (:class:`TypeFragment`), small and cacheable, and the rename
of its type names that assembly uses when two tools' names would clash."""

from __future__ import annotations

import dataclasses
import io
import tokenize
from dataclasses import dataclass

JSON_ALIAS = "JSON"
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
