"""Extract the fidelity corpora (``tests/corpora/``) from peers' own test suites.

Two sources, each downloaded by hand first (see ``tests/corpora/README.md``):

- pydantic-monty's test cases (``crates/monty/test_cases/*.py`` of the
  ``pydantic_monty_runtime`` 1.4.0 source package, MIT): a program per file, its expected
  end in a last comment (``# Return=``, ``# Raise=``) or a ``TRACEBACK`` string;
- smolagents' executor tests (``tests/test_local_python_executor.py`` of the smolagents
  1.26.0 source package, Apache-2.0): its test suite is run once with
  ``evaluate_python_code`` recorded; every call made by a passing test becomes a program
  (the variables it was given become assignments on top, the functions it was given their
  source, and a final assignment, whose value smolagents returns, becomes a trailing
  expression) expecting the value smolagents returned.

A case is kept only when CPython 3.11 passes it: run as a module (fresh ``__main__``
globals, top-level ``await`` allowed), each in its own ``python -I`` process, it ends as
expected. A value that is not plain JSON is compared through ``str(...)`` (the case's
trailing expression is wrapped in it). Usage::

    python -m benchmarks.fidelity_extract monty PATH/pydantic_monty_runtime-1.4.0
    python -m benchmarks.fidelity_extract smolagents PATH/smolagents-1.26.0 \\
        --python PATH/venv/bin/python   # a venv with smolagents 1.26.0, pytest, numpy, pandas
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.worker.fidelity import CORPORA_DIR, Case, is_plain_json

# Runs one program as CPython runs a module (fresh __main__ globals, the standard library
# only: no site-packages), with the value of a
# trailing expression statement and top-level await; writes the end as JSON to the fd
# number in argv[1].
_REFERENCE = r"""
import ast, asyncio, builtins, inspect, json, os, sys
sys.path[:] = [p for p in sys.path if "-packages" not in p]  # the standard library only
code = sys.stdin.read()
out = os.fdopen(int(sys.argv[1]), "w")
g = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT

def end(**fields):
    out.write(json.dumps(fields)); out.flush(); os._exit(0)

def failed(e):
    t = type(e)
    name = t.__qualname__
    if t.__module__ not in ("__main__", "builtins"):
        name = f"{t.__module__}.{name}"
    try:
        message = e.msg if isinstance(e, SyntaxError) else str(e)
    except BaseException:
        message = "<unprintable>"
    sys.stdout.flush()
    end(ok=False, error_type=name, error_message=message)

try:
    tree = ast.parse(code, "<program>")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, "<program>", "exec", flags=FLAGS)
    tail = compile(last, "<program>", "eval", flags=FLAGS) if last is not None else None
    is_async = any(c is not None and c.co_flags & inspect.CO_COROUTINE for c in (body, tail))

    async def main():
        r = eval(body, g)
        if inspect.isawaitable(r):
            await r
        v = eval(tail, g) if tail is not None else None
        if tail is not None and tail.co_flags & inspect.CO_COROUTINE:
            v = await v
        return v

    if is_async:
        value = asyncio.run(main())
    else:
        exec(body, g)
        value = eval(tail, g) if tail is not None else None
except BaseException as e:
    failed(e)
sys.stdout.flush()
try:
    literal = ast.literal_eval(repr(value))
    comparable = literal == value
except Exception:
    comparable = False
end(ok=True, value_repr=repr(value), literal=comparable)
"""

REFERENCE_TIMEOUT_SECONDS = 20


def run_reference(code: str, *, seed: int = 0) -> dict[str, Any]:
    """How CPython (this interpreter, 3.11) ends ``code`` run as a module: ``ok``, and
    ``value_repr`` or ``error_type``/``error_message``; ``stdout`` is its output."""
    read, write = os.pipe()
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", _REFERENCE, str(write)],
            input=code.encode("utf-8", "surrogatepass"),
            capture_output=True,
            pass_fds=(write,),
            timeout=REFERENCE_TIMEOUT_SECONDS,
            env={"PYTHONHASHSEED": str(seed)},
            cwd=tempfile.gettempdir(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        os.close(read)
        return {"ok": False, "error_type": "<timeout>", "error_message": ""}
    finally:
        os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    if not text:
        return {"ok": False, "error_type": "<crash>", "error_message": proc.stderr.decode()[-300:]}
    result: dict[str, Any] = json.loads(text)
    result["stdout"] = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode(
        "utf-8", "replace"
    )
    return result


def _wrap_trailing(code: str, func: str) -> str | None:
    """``code`` with its trailing expression statement wrapped in ``func(...)``."""
    tree = ast.parse(code)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    node = tree.body[-1].value
    assert node.end_lineno is not None and node.end_col_offset is not None
    lines = code.split("\n")
    first, last = node.lineno - 1, node.end_lineno - 1
    end_line = lines[last]
    lines[last] = end_line[: node.end_col_offset] + ")" + end_line[node.end_col_offset :]
    start_line = lines[first]
    lines[first] = start_line[: node.col_offset] + f"{func}(" + start_line[node.col_offset :]
    return "\n".join(lines)


def _expect_value(
    case_id: str, code: str, expected_repr: str, got: dict[str, Any], imports: list[str]
) -> Case | None:
    """A value case if CPython's value has ``expected_repr``: the value itself when it is
    plain JSON, else its ``str()`` (the trailing expression wrapped in ``str(...)``; not
    ``repr``, which smolagents does not provide), the same whatever the hash seed."""
    if not got["ok"] or got["value_repr"] != expected_repr:
        return None
    value = ast.literal_eval(expected_repr) if got["literal"] else None
    if got["literal"] and is_plain_json(value):
        return Case(id=case_id, code=code, expect="value", value=value, authorized_imports=imports)
    wrapped = _wrap_trailing(code, "str")
    if wrapped is None:
        return None
    texts = {json.dumps(run_reference(wrapped, seed=seed).get("value_repr")) for seed in (0, 1)}
    if len(texts) != 1 or " at 0x" in expected_repr:
        return None
    as_str = ast.literal_eval(json.loads(texts.pop()))
    return Case(id=case_id, code=wrapped, expect="value", value=as_str, authorized_imports=imports)


# --- pydantic-monty ---------------------------------------------------------------------

_MONTY_SKIP = ("call-external", "mount-fs", "timezone")
"""Header keys of cases that need a host Monty's runner provides (external functions, a
mounted file system, a session time zone)."""


def _monty_header(text: str) -> dict[str, str]:
    match = re.match(r"# /// monty\n((?:#.*\n)*?)# ///\n", text)
    if match is None:
        return {}
    header: dict[str, str] = {}
    for line in match.group(1).splitlines():
        key, _, value = line.lstrip("# ").partition("=")
        header[key.strip()] = value.split("#")[0].strip()
    return header


def _exception_of(expr: str) -> tuple[str, str]:
    """Type name and ``str()`` of an exception written as ``Type('message', ...)``."""
    call = ast.parse(expr, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name), expr
    name = call.func.id
    args = [ast.literal_eval(a) for a in call.args]
    cls = getattr(__import__("builtins"), name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        cls = type(name, (Exception,), {})
    return name, str(cls(*args))


def _traceback_end(traceback: str) -> tuple[str, str]:
    """Type name and message of the last exception of a printed traceback."""
    lines = traceback.rstrip("\n").split("\n")
    start = max(i for i, line in enumerate(lines) if line.startswith(" ") or i == 0) + 1
    if start >= len(lines):
        start = len(lines) - 1
    text = "\n".join(lines[start:])
    name, _, message = text.partition(": ")
    return name, message


def monty_cases(source: Path) -> Iterator[tuple[Case | None, str]]:
    """Every test case of the Monty source tree, as a case CPython passes, or ``None``
    with the reason it was left out."""
    for path in sorted((source / "crates/monty/test_cases").glob("*.py")):
        case_id = f"monty/{path.stem}"
        text = path.read_text(encoding="utf-8")
        header = _monty_header(text)
        if skip := [k for k in _MONTY_SKIP if k in header]:
            yield None, f"{case_id}: needs {skip[0]}"
            continue
        if "cpython" in header.get("xfail", ""):
            yield None, f"{case_id}: xfail on CPython"
            continue
        marker = '"""\nTRACEBACK:\n'
        lines = text.rstrip("\n").split("\n")
        if marker in text:
            code, _, rest = text.partition(marker)
            expected: tuple[str, str] | str | None = _traceback_end(rest.rsplit('\n"""', 1)[0])
        elif lines[-1].startswith("# Raise="):
            code = "\n".join(lines[:-1])
            expected = _exception_of(lines[-1].removeprefix("# Raise="))
        elif lines[-1].startswith("# Return="):
            code = "\n".join(lines[:-1])
            expected = lines[-1].removeprefix("# Return=")
        elif lines[-1].startswith(("# Return.", "# ref-counts=")):
            code, expected = "\n".join(lines[:-1]), None
        else:
            code, expected = text, None
        code = code.rstrip() + "\n"
        got = run_reference(code)
        case: Case | None
        if isinstance(expected, tuple):
            same = (not got["ok"]) and (got["error_type"], got["error_message"]) == expected
            case = (
                Case(
                    id=case_id,
                    code=code,
                    expect="exception",
                    error_type=expected[0],
                    error_message=expected[1],
                )
                if same
                else None
            )
        elif isinstance(expected, str):
            case = _expect_value(case_id, code, expected, got, [])
        else:
            case = Case(id=case_id, code=code, expect="success") if got["ok"] else None
        yield case, f"{case_id}: CPython 3.11 ends otherwise: {_summary(got)}"


def _summary(got: dict[str, Any]) -> str:
    if got["ok"]:
        return f"value {got['value_repr'][:80]}"
    return f"{got['error_type']}: {got['error_message'][:120]}"


# --- smolagents -------------------------------------------------------------------------

# Loaded into smolagents' own test run (pytest -p): records every evaluate_python_code
# call (the code, the variables and functions it was given, how it ended) and which tests
# passed, as JSON lines.
_RECORDER = r"""
import ast, copy, inspect, json, os
import smolagents.local_python_executor as lpe
from smolagents.default_tools import BASE_PYTHON_TOOLS

_out = open(os.environ["FIDELITY_RECORD"], "a")
_original = lpe.evaluate_python_code
_signature = inspect.signature(_original)

def _literal(value):
    try:
        return ast.literal_eval(repr(value)) == value
    except Exception:
        return False

def _names(code):
    try:
        return {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()

def _given(code, state, static_tools, custom_tools):
    used = _names(code)
    values, functions, unusable = {}, {}, []
    for name, value in (state or {}).items():
        if name in used:
            if _literal(value):
                values[name] = repr(value)
            else:
                unusable.append(name)
    for tools in (static_tools or {}), (custom_tools or {}):
        for name, tool in tools.items():
            if name not in used or BASE_PYTHON_TOOLS.get(name) is tool:
                continue
            try:
                plain = inspect.isfunction(tool) and tool.__name__ == name
                functions[name] = inspect.getsource(tool) if plain else None
            except (OSError, TypeError):
                functions[name] = None
            if functions[name] is None:
                unusable.append(name)
    return values, functions, unusable

def recording(*args, **kwargs):
    bound = _signature.bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    values, functions, unusable = _given(
        a["code"], a["state"], a["static_tools"], a["custom_tools"]
    )
    entry = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
        "code": a["code"], "values": values, "functions": functions, "unusable": unusable,
        "imports": sorted(set(a["authorized_imports"]) - set(lpe.BASE_BUILTIN_MODULES)),
    }
    try:
        result = _original(*bound.args, **bound.kwargs)
    except BaseException as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
        _out.write(json.dumps(entry) + "\n"); _out.flush()
        raise
    state = bound.arguments["state"]
    entry.update(value_repr=repr(result[0]), final=bool(result[1]),
                 stdout=str(state.get("_print_outputs", "")) if state is not None else "")
    _out.write(json.dumps(entry) + "\n"); _out.flush()
    return result

lpe.evaluate_python_code = recording

def pytest_runtest_logreport(report):
    if report.when == "call":
        _out.write(json.dumps({"passed": report.nodeid, "ok": report.passed}) + "\n"); _out.flush()

def pytest_runtest_call(item):
    source = inspect.getsource(item.function) if hasattr(item, "function") else ""
    checks = "_print_outputs" in source or ".logs" in source
    _out.write(json.dumps({"prints": item.nodeid, "checked": checks}) + "\n"); _out.flush()
"""


def record_smolagents(source: Path, python: str) -> list[dict[str, Any]]:
    """Run smolagents' executor tests with ``python``, recording every evaluated program."""
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "fidelity_recorder.py").write_text(_RECORDER, encoding="utf-8")
        record = Path(scratch, "record.jsonl")
        env = {
            **os.environ,
            "PYTHONPATH": scratch,
            "FIDELITY_RECORD": str(record),
            "PYTHONHASHSEED": "0",
        }
        subprocess.run(
            [
                python,
                "-m",
                "pytest",
                "-q",
                "-p",
                "fidelity_recorder",
                "-p",
                "no:cacheprovider",
                "--continue-on-collection-errors",
                "tests/test_local_python_executor.py",
            ],
            cwd=source,
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]


def _smolagents_program(entry: dict[str, Any]) -> str | None:
    """The recorded call as a standalone program, or ``None`` when it cannot be one."""
    if "error" in entry or entry["final"] or entry["unusable"]:
        return None
    code = textwrap.dedent(entry["code"]).strip("\n")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    prelude = [f"{name} = {value}" for name, value in sorted(entry["values"].items())]
    prelude += [textwrap.dedent(src).strip("\n") for _, src in sorted(entry["functions"].items())]
    tail = ""
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Assign | ast.AugAssign | ast.AnnAssign):
        target = last.targets[-1] if isinstance(last, ast.Assign) else last.target
        names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [None])
        if all(isinstance(t, ast.Name) for t in names):
            tail = "\n" + ast.unparse(target)
    return "\n".join([*prelude, code]) + tail + "\n"


_STARTS_A_PROCESS = frozenset(
    {
        "TestLocalPythonExecutorSecurity::test_vulnerability_via_sys[additional_authorized_imports2-None]",
        "TestLocalPythonExecutorSecurity::test_vulnerability_via_importlib[additional_authorized_imports1-None]",
        "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_sys[additional_authorized_imports4-additional_tools4-None]",
        "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_call[code4-additional_allowed_dunder_methods4-None]",
    }
)
"""smolagents' tests that pass when a program may start a process (``os.system(":")``,
``subprocess.Popen``): every ptc run's containment refuses exec, by design."""


def smolagents_cases(source: Path, python: str) -> Iterator[tuple[Case | None, str]]:
    entries = record_smolagents(source, python)
    passed = {e["passed"] for e in entries if "passed" in e and e["ok"]}
    print_checked = {e["prints"] for e in entries if "prints" in e and e["checked"]}
    seen: set[str] = set()
    counters: dict[str, int] = {}
    for entry in entries:
        if "code" not in entry:
            continue
        test = entry["test"]
        name = test.split("::", 1)[-1]
        counters[name] = counters.get(name, 0) + 1
        case_id = f"smolagents/{name}#{counters[name]}"
        if test not in passed:
            yield None, f"{case_id}: its test did not pass"
            continue
        if name in _STARTS_A_PROCESS:
            yield None, f"{case_id}: starts a process (ptc's containment refuses exec)"
            continue
        program = _smolagents_program(entry)
        if program is None:
            yield None, f"{case_id}: not standalone (an error, final_answer, an object given)"
            continue
        if program in seen:
            continue
        seen.add(program)
        got = run_reference(program)
        case = _expect_value(case_id, program, entry["value_repr"], got, entry["imports"])
        if case is not None and test in print_checked:
            if got["stdout"] != entry["stdout"]:
                case = None
            else:
                case = dataclasses.replace(case, stdout=entry["stdout"])
        yield case, f"{case_id}: CPython 3.11 ends otherwise: {_summary(got)}"


# --- output -----------------------------------------------------------------------------

SOURCES = {
    "monty": {
        "file": "monty-1.4.0.MIT.json",
        "source": "pydantic-monty-runtime 1.4.0 sdist (PyPI), crates/monty/test_cases/*.py",
        "license": "MIT",
    },
    "smolagents": {
        "file": "smolagents-1.26.0.Apache-2.0.json",
        "source": "smolagents 1.26.0 sdist (PyPI), tests/test_local_python_executor.py",
        "license": "Apache-2.0",
    },
}


def write_corpus(which: str, cases: list[Case], left_out: list[str]) -> Path:
    meta = SOURCES[which]
    path = CORPORA_DIR / meta["file"]
    document = {
        "source": meta["source"],
        "license": meta["license"],
        "extracted_by": "python -m benchmarks.fidelity_extract " + which,
        "kept": "cases CPython 3.11 passes, run as a module (see benchmarks/fidelity_extract.py)",
        "left_out": len(left_out),
        "cases": [case.as_json() for case in cases],
    }
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity_extract")
    parser.add_argument("which", choices=sorted(SOURCES))
    parser.add_argument("source", type=Path, help="the unpacked source package")
    parser.add_argument("--python", default=sys.executable, help="smolagents' test venv")
    parser.add_argument("--verbose", action="store_true", help="list what was left out")
    args = parser.parse_args(argv)
    if sys.version_info[:2] != (3, 11):
        parser.error("the reference is CPython 3.11: run this with a 3.11 interpreter")
    found = (
        monty_cases(args.source)
        if args.which == "monty"
        else smolagents_cases(args.source, args.python)
    )
    cases: list[Case] = []
    left_out: list[str] = []
    for case, why in found:
        if case is None:
            left_out.append(why)
        else:
            cases.append(case)
    path = write_corpus(args.which, cases, left_out)
    if args.verbose:
        print("\n".join(left_out))
    kinds = {k: sum(c.expect == k for c in cases) for k in ("success", "value", "exception")}
    print(f"{path}: {len(cases)} cases {kinds}, {len(left_out)} left out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
