# ptc SDK (representative set). Call tools.<name>(...); see docstrings.
from typing import Any, Callable, Generic, Literal, NotRequired, ParamSpec, TypeAlias, TypeVar, TypedDict

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

class AnnotateInputRecordMeta(TypedDict):
    source: NotRequired[str]
class AnnotateInputRecord(TypedDict):
    id: str
    meta: NotRequired[AnnotateInputRecordMeta | dict[str, JSON]]
class AnnotateOutputRecord(TypedDict):
    id: NotRequired[str]
class AnnotateOutput(TypedDict):
    record: NotRequired[AnnotateOutputRecord]

ClassOutput: TypeAlias = str

GetWeatherV2Output = TypedDict('GetWeatherV2Output', {
    'temp-c': float,
    'class': NotRequired[str],
})

class NowOutput(TypedDict):
    iso: str

# odd: input schema not supported (SchemaParseError); typed as JSON
# odd: output schema not supported (SchemaParseError); typed as JSON

PairOutput: TypeAlias = list[float | str | bool]

class PayInputMethod(TypedDict):
    card_number: str
class PayInputMethod1(TypedDict):
    voucher: str
class PayOutput(TypedDict):
    receipt: str | None

class SearchFlightsInputRoute(TypedDict):
    """Where to fly"""
    origin: str
    destination: str
class SearchFlightsInputPassenger(TypedDict):
    """One traveller"""
    name: str
    age: NotRequired[int]
    kind: Literal['adult', 'child', 'infant']
class SearchFlightsOutputFlight(TypedDict):
    id: str  # Flight id
    legs: NotRequired[list[list[str]]]
    price: float
class SearchFlightsOutput(TypedDict):
    flights: list[SearchFlightsOutputFlight]

class SetStatusOutput(TypedDict):
    previous: Literal['open', 'closed', 'wontfix']

class TreeWalkInputNode(TypedDict):
    label: str
    children: NotRequired[list[TreeWalkInputNode | dict[str, JSON]]]
TreeWalkOutputCount: TypeAlias = int
class TreeWalkOutput(TypedDict):
    visited: TreeWalkOutputCount

class tools:
    @staticmethod
    def call(name: str, /, **arguments: Any) -> JSON:
        """Call a tool by its original name (``tools.call("web-search", q="x")``)."""
    @_tool
    def annotate(*, record: AnnotateInputRecord | dict[str, JSON], label: str = ..., extra: int = ..., **extra_: JSON) -> AnnotateOutput:
        """Label a record; other keys are kept as they are.

        extra: Takes the usual ** name.
        """
    @_tool
    def anything(**extra: JSON) -> JSON:
        """No declared parameters: any keys go."""
    @_tool
    def class_(*, from_: str, import_: bool = ..., filter: str = ..., **extra: JSON) -> ClassOutput:
        """A keyword as a tool name."""
    @_tool
    def get_weather_v2(*, my_city_2: str, p_2fa: str = ..., my_city: str = ..., **extra: JSON) -> GetWeatherV2Output:
        """Weather with odd keys."""
    @_tool
    def legacy_range(*, low: float) -> JSON:
        """draft-04: a boolean exclusiveMinimum.

        low: exclusiveMinimum: 0
        """
    @_tool
    def list_(**extra: JSON) -> JSON:
        """A builtin as a tool name."""
    @_tool
    def log_event(*, message: str, **extra: JSON) -> JSON:
        """Log an event. Quotes \"\"\" and a \\ backslash survive.

        message: maxLength: 200
        """
    @_tool
    def mcp_server_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_xxxxxxxxx(*, q: str = ...) -> JSON:
        """A 128-character name (MCP's limit)."""
    @_tool
    def now() -> NowOutput:
        """The current time."""
    @_tool
    def odd(*, x: JSON = ..., **extra: JSON) -> JSON:
        """Schemas the generator cannot handle fall back to JSON."""
    @_tool
    def pair(*, point: list[float | str]) -> PairOutput:
        """draft-07: items as an array (a tuple).

        point: items in order: "number", "string"
        """
    @_tool
    def patterned(*, name: str = ..., **extra: JSON) -> JSON:
        """Keys matching a pattern are accepted besides the declared ones."""
    @_tool
    def pay(*, method: PayInputMethod | dict[str, JSON] | (PayInputMethod1 | dict[str, JSON]), amount: int | float, note: str | None = ..., tags: dict[str, str] = ..., **extra: JSON) -> PayOutput:
        """Pay with a card or a voucher."""
    @_tool
    def search_flights(*, route: SearchFlightsInputRoute | dict[str, JSON], passengers: list[SearchFlightsInputPassenger], max_price: float = ...) -> SearchFlightsOutput:
        """Find flights between two airports.

        Results are sorted by price.

        route: Where to fly
        passengers: minItems: 1
        max_price: exclusiveMinimum: 0
        """
    @_tool
    def set_status(*, status: Literal['open', 'closed', 'wontfix'], level: Literal[1, 2] = ...) -> SetStatusOutput:
        """Set a status.

        status: "open"=in progress; "closed"=done; "wontfix"=declined
        level: 1=low; 2=high
        """
    @_tool
    def tools__2(**extra: JSON) -> JSON:
        """Collides with the namespace."""
    @_tool
    def tools_(**extra: JSON) -> JSON:
        """Keeps its name."""
    @_tool
    def tree_walk(*, root: TreeWalkInputNode | dict[str, JSON], **extra: JSON) -> TreeWalkOutput:
        """Walk a tree of nodes."""
