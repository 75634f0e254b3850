# ptc SDK (representative set). Call tools.<name>(...); see docstrings.
from typing import Any, Callable, Generic, ParamSpec, TypeAlias, TypeVar, TypedDict

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

class tools:
    @staticmethod
    def call(name: str, /, **arguments: Any) -> JSON:
        """Call a tool by its original name (``tools.call("web-search", q="x")``)."""
    @_tool
    def mcp_server_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_xxxxxxxxx(*, q: str = ...) -> JSON:
        """A 128-character name (MCP's limit)."""
