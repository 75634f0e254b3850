"""Render the stub (what the model reads) and the worker module from one list of ToolIR.

Both renderers emit each tool's ``def`` line through :func:`signature`, so the signatures
are identical by construction (and a test compares them).
"""

from __future__ import annotations

from pathlib import Path

from ._ir import ToolIR
from ._pacing import pause
from ._render_types import comment, docstring, printable

_MARKER = "# --- generated module runtime starts here ---\n"
_RUNTIME_SOURCE = Path(__file__).with_name("_module_runtime.py").read_text(encoding="utf-8")
MODULE_RUNTIME = _RUNTIME_SOURCE[_RUNTIME_SOURCE.index(_MARKER) + len(_MARKER) :]

_STUB_TYPING = ("Any", "Callable", "Generic", "ParamSpec", "TypeAlias", "TypeVar", "TypedDict")
_STUB_PRELUDE = '''
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
_P = ParamSpec("_P")
_R = TypeVar("_R")

class ToolCallError(Exception):
    """A failed or denied call; str(e) == f"{e.tool}: {e.code}: {e.message}"."""
    tool: str
    code: str
    message: str

class _Tool(Generic[_P, _R]):
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def map(self, calls: list[dict[str, Any]], /) -> list[_R]:
        """One call per dict of keyword arguments, sent as one batch; results in order."""

def _tool(f: Callable[_P, _R]) -> _Tool[_P, _R]: ...

def parallel(*thunks: Callable[[], Any]) -> list[Any]:
    """parallel(lambda: tools.a(x=1), lambda: tools.b()): one batch; results in order."""

class CatalogHit(TypedDict):
    name: str
    ident: str
    summary: str

class catalog:
    @staticmethod
    def search(query: str, limit: int = 10) -> list[CatalogHit]:
        """The visible tools that best match ``query`` (BM25), best first."""
    @staticmethod
    def describe(*idents: str) -> str:
        """The typed stub of these tools (identifiers or original names)."""
'''
# `tools.call` (first in `class tools`): any visible tool by its original name or identifier.
_STUB_TOOLS_CALL = """    @staticmethod
    def call(name: str, /, **arguments: Any) -> JSON:
        \"\"\"Call a tool by its original name (``tools.call("web-search", q="x")``).\"\"\"
"""


def signature(tool: ToolIR, *, typed: bool = True, extra: bool = True) -> str:
    """The ``def`` line of one tool (without indentation). ``typed=False``: no annotations
    (the worker module's form: they would never be evaluated); ``extra=False``: no
    ``**extra`` parameter (the model's form: it need not pass undeclared keys)."""
    params = []
    for p in tool.params:
        text = f"{p.ident}: {p.annotation}" if typed else p.ident
        params.append(text if p.required else f"{text} = ..." if typed else f"{text}=...")
    star = ["*"] if params else []
    more = []
    if tool.extra and extra:
        more = [f"**{tool.extra}: JSON" if typed else f"**{tool.extra}"]
    returns = f" -> {tool.returns}" if typed else ""
    return f"def {tool.ident}({', '.join(star + params + more)}){returns}:"


def _tool_docstring(tool: ToolIR) -> str:
    lines = list(tool.description)
    documented = [f"{p.ident}: {p.doc}" for p in tool.params if p.doc]
    if documented:
        lines += ["", *documented] if lines else documented
    return docstring(lines, "        ") if lines else ""


def render_stub(tools: list[ToolIR], header: str, *, prelude: bool = True) -> str:
    """The SDK stub of ``tools`` (each must be typed). ``prelude=True``: the whole SDK as
    valid stub source that type-checks as a ``.pyi`` (imports, the ``JSON`` alias, the
    ``tools`` / ``parallel`` / ``catalog`` typing); ``False``: what a model reads of the
    same tools (their types, signatures and docstrings; no imports, decorators, notes or
    ``**extra``), for ``run_code``'s description and ``catalog.describe``."""
    untyped = [t.ident for t in tools if not t.typed]
    if untyped:
        raise ValueError(f"tools without a type fragment cannot be rendered: {untyped}")
    out: list[str] = []
    if prelude:
        out += [f"# {printable(line)}".rstrip() + "\n" for line in header.splitlines()]
        typing_names = sorted(set(_STUB_TYPING).union(*(t.typing_names for t in tools)))
        out.append(f"from typing import {', '.join(typing_names)}\n")
        out.append(_STUB_PRELUDE)
    for tool in tools:
        pause()
        if prelude and (tool.definitions or tool.notes):
            out.append("\n")
        if prelude:
            out.extend(f"{comment(f'{tool.name}: {note}')}\n" for note in tool.notes)
        out.extend(tool.definitions)
    out.append("\nclass tools:\n" if out else "class tools:\n")
    if prelude:
        out.append(_STUB_TOOLS_CALL)
    for tool in tools:
        pause()
        decorator = "    @_tool\n" if prelude else ""
        out.append(f"{decorator}    {signature(tool, extra=prelude)}\n")
        out.append(_tool_docstring(tool) or "        ...\n")
    if not tools and not prelude:
        out.append("    ...\n")
    return "".join(out)


def _invoke_name(tool: ToolIR) -> str:
    # A parameter could be called __sdk__; the body must reach the global, not the argument.
    taken = {p.ident for p in tool.params}
    name = "__sdk__"
    while name in taken:
        name += "_"
    return name


def render_module(tools: list[ToolIR]) -> str:
    """The worker module: the runtime, then the same signatures with transport bodies.

    Annotations are omitted: they would never be evaluated, and a tool whose stub no one
    reads has none (its fragment was never generated)."""
    out = ["from __future__ import annotations\n", MODULE_RUNTIME]
    aliases = sorted({_invoke_name(t) for t in tools} - {"__sdk__"}, key=len)
    out.extend(f"{alias} = _invoke\n" for alias in aliases)
    # Module-level defs, not a class body: inside a class a parameter named `__x` would be
    # name-mangled. Tool idents never start with `_`, so they cannot shadow the runtime.
    for tool in tools:
        pause()
        arguments = ", ".join(f"{p.key!r}: {p.ident}" for p in tool.params)
        extra = f", {tool.extra}" if tool.extra else ""
        out.append(f"\n\n@_tool\n{signature(tool, typed=False)}\n")
        out.append(f"    return {_invoke_name(tool)}({tool.name!r}, {{{arguments}}}{extra})\n")
    members = "".join(f"    {t.ident!r}: {t.ident},\n" for t in tools)
    names = "".join(f"    {t.ident!r}: {t.name!r},\n" for t in tools)
    out.append(f"\n\n_TOOL_NAMES = {{\n{names}}}\n")
    out.append("_TOOL_IDENTS = {name: ident for ident, name in _TOOL_NAMES.items()}\n")
    out.append(
        f"tools = _Namespace('tools', (), {{\n{members}    'call': staticmethod(_call),\n}})\n"
    )
    return "".join(out)
