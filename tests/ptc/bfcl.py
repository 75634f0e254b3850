"""Function-calling schemas from the wild (BFCL) through ptc: the loader and the checks.

Used by ``test_bfcl.py`` on the checked-in sample (``data/bfcl_sample.jsonl``), by
``data/make_bfcl_sample.py`` to build that sample, and from the command line on the whole
data set::

    pip download --no-deps bfcl-eval==2026.3.23 && unzip bfcl_eval-*.whl 'bfcl_eval/data/*'
    python -m tests.ptc.bfcl bfcl_eval/data        # or no argument: the checked-in sample

Each definition goes ``lenient_schema`` -> ``define_tool`` -> SDK (the stubs of batches of
tools pass ``mypy --strict``) -> a real code-mode run on the in-process ``FakeBackend`` that
makes each schema-valid ground-truth call, which must reach the tool with exactly the
expected arguments and bring its value back unchanged.
"""

from __future__ import annotations

import ast
import json
import keyword
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mypy import api as mypy_api

import ptc
import sdkgen
from ptc._calls._tools import compact_json_render
from ptc._code._preflight import near_miss
from sdkgen._simple_types import simple_fragment
from tests._typing import data
from worker.testing import FakeBackend

SAMPLE = Path(__file__).with_name("data") / "bfcl_sample.jsonl"
BATCH_SIZE = 25
# The categories whose ground truth is function calls (and where their definitions are).
_MULTI_TURN_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}


@dataclass
class Record:
    """One distinct function definition and the ground-truth calls made to it.

    ``calls`` are Python dict literals (``"{'folder': 'docs', 'pair': (1, 2)}"``): the
    ground truth passes tuples for arrays, which JSON cannot say."""

    source: str
    function: dict[str, Any]
    calls: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(
            {"source": self.source, "function": self.function, "calls": self.calls},
            ensure_ascii=False,
            sort_keys=True,
        )


def load_sample(path: Path = SAMPLE) -> list[Record]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("//"):
            data = json.loads(line)
            records.append(Record(data["source"], data["function"], list(data["calls"])))
    return records


# --- reading the data set ------------------------------------------------------------------


def load_data_set(data: Path) -> list[Record]:
    """Every distinct definition of the BFCL data directory, with its ground-truth calls."""
    by_key: dict[str, Record] = {}

    def record(source: str, function: dict[str, Any]) -> Record:
        key = json.dumps(function, sort_keys=True)
        if key not in by_key:
            by_key[key] = Record(source, function)
        return by_key[key]

    docs: dict[str, list[dict[str, Any]]] = {}
    for cls, file in _MULTI_TURN_DOCS.items():
        path = data / "multi_turn_func_doc" / file
        docs[cls] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for function in docs[cls]:
            record(file, function)
    questions = sorted(data.glob("BFCL_v4_*.json")) + sorted(
        (data / "unused_datasets" / "question").glob("BFCL_v4_*.json")
    )
    for path in questions:
        if "format_sensitivity" in path.name:
            continue  # a list of ids, not entries
        answers = _answers(data, path)
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            functions = list(entry.get("function") or [])
            for cls in entry.get("involved_classes") or []:
                functions += docs.get(cls, [])
            by_name = {f["name"]: record(path.name, f) for f in functions}
            truth = answers.get(entry.get("id", ""))
            for name, kwargs in _ground_truth_calls(truth, by_name):
                if kwargs not in by_name[name].calls:  # the same call recurs across entries
                    by_name[name].calls.append(kwargs)
    return list(by_key.values())


def _answers(data: Path, question: Path) -> dict[str, Any]:
    folder = question.parent.parent if question.parent.name == "question" else question.parent
    path = folder / "possible_answer" / question.name
    if not path.exists():
        return {}
    entries = map(json.loads, path.read_text().splitlines())
    return {entry["id"]: entry["ground_truth"] for entry in entries}


def _ground_truth_calls(truth: Any, by_name: dict[str, Record]) -> Iterable[tuple[str, str]]:
    """``(function name, kwargs literal)`` for each call in one entry's ground truth."""
    if isinstance(truth, list) and truth and all(isinstance(t, list) for t in truth):
        truth = [call for turn in truth for call in turn]  # multi-turn: turns of calls
    for call in truth if isinstance(truth, list) else []:
        if isinstance(call, str):
            parsed = _parse_call(call, by_name)
            if parsed is not None:
                yield parsed
        elif isinstance(call, dict) and len(call) == 1:
            ((name, options),) = call.items()
            if name in by_name and isinstance(options, dict):
                schema = by_name[name].function.get("parameters") or {}
                kwargs = _choose(options, schema)
                yield name, repr(kwargs)


def _parse_call(text: str, by_name: dict[str, Record]) -> tuple[str, str] | None:
    """``"mv(source='a', destination='b')"``: positional arguments map to the parameters
    in the order the definition lists them."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)):
        return None
    name = ast.unparse(node.func)
    if name not in by_name:
        return None
    order = list((by_name[name].function.get("parameters") or {}).get("properties") or {})
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        for i, arg in enumerate(node.args):
            kwargs[order[i]] = ast.literal_eval(arg)
    except (ValueError, IndexError, SyntaxError, TypeError):
        return None
    return name, repr(kwargs)


def _choose(options: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """One concrete call from BFCL's possible answers: per parameter the first acceptable
    value (``""`` means "may be left out"); a dict parameter's answers hold answer lists
    per key, as BFCL's own checker reads them."""
    properties = schema.get("properties") or {}
    kwargs = {}
    for key, answers in options.items():
        value = _first(answers)
        if value is _OMIT:
            continue
        kind = (properties.get(key) or {}).get("type")
        items = (properties.get(key) or {}).get("items") or {}
        if kind == "dict" and isinstance(value, dict):
            value = _choose_keys(value)
        elif isinstance(items, dict) and items.get("type") == "dict" and isinstance(value, list):
            value = [_choose_keys(v) if isinstance(v, dict) else v for v in value]
        kwargs[key] = value
    return kwargs


_OMIT = object()


def _first(answers: Any) -> Any:
    if not isinstance(answers, list):
        return answers
    for answer in answers:
        if answer != "":
            return answer
    return _OMIT


def _choose_keys(value: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, answers in value.items():
        chosen = _first(answers)
        if chosen is not _OMIT:
            out[key] = chosen
    return out


# --- the checks --------------------------------------------------------------------------


@dataclass
class Counts:
    definitions: int = 0
    as_is: int = 0
    after_lenient: int = 0
    sdk_batches: int = 0
    sdk_batches_ok: int = 0
    sdk_definitions_ok: int = 0
    calls: int = 0
    calls_schema_valid: int = 0
    calls_round_trip: int = 0
    calls_type_check: int = 0
    fast_inputs: int = 0
    """Inputs sdkgen types without the type generator (its fast path)."""
    fast_tools: int = 0
    """... inputs and responses together."""
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.definitions} definitions: {self.as_is} accepted as they are, "
            f"{self.after_lenient} after lenient_schema; SDK: {self.sdk_batches_ok} of "
            f"{self.sdk_batches} batches ({self.sdk_definitions_ok} definitions) pass mypy "
            f"--strict; ground-truth calls: {self.calls}, {self.calls_schema_valid} valid "
            f"against their schema, {self.calls_round_trip} round-trip exactly, "
            f"{self.calls_type_check} type-check against the stub (mypy --strict); typed "
            f"without the type generator: {self.fast_inputs} inputs, {self.fast_tools} with "
            f"their responses"
        )


def _define(function: dict[str, Any], lenient: bool) -> ptc.ToolDefinition:
    parameters = function.get("parameters") or {"type": "object"}
    response = function.get("response") or {}
    if lenient:
        parameters, _ = ptc.lenient_schema(parameters)
        response, _ = ptc.lenient_schema(response)
    return ptc.define_tool(
        name=function["name"],
        description=function["description"],
        input_schema=parameters,
        output=ptc.Output(response, compact_json_render),
        execute=_unused,
    )


def _unused(arguments: Any, context: Any) -> Any:
    raise AssertionError("replaced before use")


def check(records: Sequence[Record], *, mypy: bool = True) -> Counts:
    """Run every record through ptc and count what holds at each step."""
    counts = Counts(definitions=len(records))
    accepted: list[tuple[ptc.ToolDefinition, Record]] = []
    for record in records:
        try:
            _define(record.function, lenient=False)
            counts.as_is += 1
        except ptc.SchemaError:
            pass
        try:
            accepted.append((_define(record.function, lenient=True), record))
            counts.after_lenient += 1
        except ptc.SchemaError as exc:
            counts.failures.append(f"lenient: {record.function['name']}: {exc}")
    for definition, _ in accepted:
        fast = simple_fragment(definition.input_schema, None, "P") is not None
        counts.fast_inputs += fast
        counts.fast_tools += (
            fast
            and simple_fragment(definition.input_schema, definition.output.schema, "P") is not None
        )
    batches = _batches(accepted)
    counts.sdk_batches = len(batches)
    stubs = anyio.run(_run_batches, batches, counts)
    if mypy:
        _typecheck(stubs, batches, counts)
    return counts


def _batches(
    accepted: list[tuple[ptc.ToolDefinition, Record]],
) -> list[list[tuple[ptc.ToolDefinition, Record]]]:
    """Batches of distinct tool names (the data set reuses names across entries)."""
    batches: list[list[tuple[ptc.ToolDefinition, Record]]] = []
    for item in accepted:
        for batch in batches:
            if len(batch) < BATCH_SIZE and all(d.name != item[0].name for d, _ in batch):
                batch.append(item)
                break
        else:
            batches.append([item])
    return batches


async def _run_batches(
    batches: list[list[tuple[ptc.ToolDefinition, Record]]], counts: Counts
) -> list[tuple[str, list[str]]]:
    return [await _run_batch(batch, counts) for batch in batches]


async def _run_batch(
    batch: list[tuple[ptc.ToolDefinition, Record]], counts: Counts
) -> tuple[str, list[str]]:
    """Returns the stub and the calls as a typed program would write them (JSON values)."""
    """Register the batch in code mode, then make every schema-valid ground-truth call from
    one program: each must reach its tool with exactly the expected arguments."""
    received: dict[int, Any] = {}
    outputs: dict[str, bool] = {}  # tool name -> has an output schema (then it returns {})

    async def echo(arguments: Any, context: ptc.ToolContext) -> Any:
        # Nested call ids are "<outer>:ptc:<n>", n from 1 in submission order.
        n = int(context.execution.call_id.rsplit(":", 1)[-1])
        received[n - 1] = json.loads(json.dumps(arguments))
        return {} if outputs[context.execution.name] else received[n - 1]

    definitions = []
    for definition, _record in batch:
        outputs[definition.name] = bool(definition.output.schema)
        definitions.append(ptc.define_tool(
            name=definition.name, description=definition.description,
            input_schema=definition.input_schema, output=definition.output, execute=echo,
        ))  # fmt: skip
    specs = [
        sdkgen.ToolSpec(name=d.name, description=d.description, input_schema=d.input_schema,
                        output_schema=d.output.schema)
        for d in definitions
    ]  # fmt: skip
    bindings = {b.name: b for b in sdkgen.generate(specs).tools}
    lines, expected, typed = ["out = []"], [], []
    for definition, record in batch:
        for literal in record.calls:
            counts.calls += 1
            kwargs = ast.literal_eval(literal)
            as_json = json.loads(json.dumps(kwargs))
            if definition.input_validator.problems(as_json):
                continue
            counts.calls_schema_valid += 1
            lines += [
                "try:",
                f"    out.append(['ok', {_call_source(bindings[definition.name], kwargs)}])",
                "except ToolCallError as e:",
                "    out.append(['error', str(e)])",
            ]
            expected.append((definition.name, as_json))
            typed.append(_call_source(bindings[definition.name], as_json, typed=True))
    lines.append("return out")
    async with ptc.ToolRuntime(
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
        default_mode="code",
        limits=ptc.Limits(max_calls=100_000, result_bytes=8 << 20, wall_seconds=300),
    ) as runtime:
        for definition in definitions:
            runtime.register(definition)
        stub = runtime.root.sdk()
        result = await runtime.root.run_code("\n".join(lines))
    if result.is_error:
        counts.failures.append(f"run: {result.error}")
        return stub, typed
    outcomes: Any = data(result.value)["result"]
    for i, ((name, want), (status, value)) in enumerate(zip(expected, outcomes, strict=True)):
        got = received.get(i)
        same = _exact(got, want) and status == "ok"
        same = same and (_exact(value, want) if not outputs[name] else value == {})
        if same:
            counts.calls_round_trip += 1
        else:
            counts.failures.append(f"call {name}: sent {want!r}, tool got {got!r}: {value!r}")
    return stub, typed


def _exact(a: Any, b: Any) -> bool:
    """Equal as JSON text: 1 and 1.0, or a list and a string, are different."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _call_source(
    binding: sdkgen.ToolBinding, kwargs: dict[str, Any], *, typed: bool = False
) -> str:
    """``tools.<ident>(<param>=<value>, ...)`` as a program would write it: declared keys by
    their parameter names, other keys (an open input) as keywords, or ``**{...}`` when a key
    is no identifier or a near miss of a parameter (the data set's own ``mention=`` for a
    declared ``mentions``, which pre-flight refuses as a likely typo when written out)."""
    idents = {p.key: p.ident for p in binding.params}
    taken = set(idents.values())
    named = [f"{idents[k]}={v!r}" for k, v in kwargs.items() if k in idents]
    extra = {k: v for k, v in kwargs.items() if k not in idents}
    plain = {
        k
        for k in extra
        if k.isidentifier()
        and not keyword.iskeyword(k)
        and k not in taken
        and near_miss(k, binding.param_idents()) is None
    }
    named += [f"{k}={v!r}" for k, v in extra.items() if k in plain]
    rest = {k: v for k, v in extra.items() if k not in plain}
    if rest:
        # For the type checker the dict's values are Any: a ** dict may fill any keyword, so
        # mypy checks its value type against every parameter (a literal's narrow type fails).
        named.append(f"**dict[str, Any]({rest!r})" if typed else f"**{rest!r}")
    return f"tools.{binding.ident}({', '.join(named)})"


def _typecheck(
    stubs: list[tuple[str, list[str]]],
    batches: list[list[tuple[ptc.ToolDefinition, Record]]],
    counts: Counts,
) -> None:
    """One mypy --strict run over every batch's stub (each its own module) and a program
    making that batch's ground-truth calls (one per line, after the import)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (stub, calls) in enumerate(stubs):
            path = Path(tmp) / f"sdk_{i}.pyi"
            path.write_text(stub, encoding="utf-8")
            program = Path(tmp) / f"calls_{i}.py"
            program.write_text(
                f"from typing import Any\nfrom sdk_{i} import tools\n"
                + "".join(c + "\n" for c in calls)
            )
            files += [str(path), str(program)]
        out, err, _ = mypy_api.run(
            ["--strict", "--no-incremental", "--cache-dir=/dev/null", "--python-version=3.11",
             *files]
        )  # fmt: skip
    bad_lines = {line.split(":")[0] + ":" + line.split(":")[1] for line in out.splitlines()
                 if line.startswith(tmp) and ".py:" in line}  # fmt: skip
    counts.calls_type_check = sum(len(calls) for _, calls in stubs) - len(bad_lines)
    for line in out.splitlines():
        if "calls_" in line and ".py:" in line:
            counts.failures.append(f"typed call: {line}")
    failed = {i for i in range(len(stubs)) if f"sdk_{i}.pyi:" in out}
    for i in failed:
        counts.failures.append(f"mypy sdk_{i}: " + "; ".join(
            line for line in out.splitlines() if f"sdk_{i}.pyi:" in line
        )[:2000])  # fmt: skip
    if err:
        counts.failures.append(f"mypy: {err}")
    counts.sdk_batches_ok = len(stubs) - len(failed)
    counts.sdk_definitions_ok = sum(len(b) for i, b in enumerate(batches) if i not in failed)


def main(argv: Sequence[str]) -> int:
    records = load_data_set(Path(argv[0])) if argv else load_sample()
    counts = check(records)
    for failure in counts.failures:
        print(failure[:400])
    print(counts.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
