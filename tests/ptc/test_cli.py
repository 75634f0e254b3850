"""``ptc run`` end to end: a real contained worker (every containment dimension ``full``
here), the printed report, ``--json``, exit statuses, and usage problems as one line; and
``--require``, in an environment where containment is short (``tests/environments``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.environments import Harness

pytestmark = pytest.mark.slow

TOOLS = '''
import ptc

def register(runtime: ptc.ToolRuntime) -> None:
    @runtime.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b
'''

PROGRAM = """
print("adding")
total = sum(tools.add.map([{"a": i, "b": i} for i in range(4)]))
return {"total": total}
"""


def ptc_cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptc", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "my_tools.py").write_text(TOOLS)
    (tmp_path / "program.py").write_text(PROGRAM)
    return tmp_path


def test_run_prints_output_result_and_enforcement(workdir: Path) -> None:
    done = ptc_cli("run", "program.py", "--tools", "my_tools:register", cwd=workdir)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("== output ==\nadding\n== result ==\n{\n  \"total\": 12\n}\n")
    report = out.split("== enforcement ==\n", 1)[1].split("== stats ==")[0].splitlines()
    assert [line.split()[:2] for line in report] == [
        [dimension, "full"] for dimension in ("filesystem", "network", "processes", "memory", "cpu")
    ]
    assert "4 tool calls" in out


def test_run_json_is_the_whole_tool_result(workdir: Path) -> None:
    done = ptc_cli(
        "run", "-", "--tools", "my_tools.py:register", "--json", "--wall", "20", "--memory", "256",
        cwd=workdir, stdin=PROGRAM,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["name"] == "run_code" and result["is_error"] is False
    assert result["value"] == {"result": {"total": 12}, "stdout": "adding\n"}
    assert [e["name"] for e in result["meta"]["dispatch_log"]] == ["add"] * 4
    assert {d["level"] for d in result["meta"]["enforcement"].values()} == {"full"}
    assert set(result) == {
        "call_id", "name", "is_error", "content", "value", "error", "meta", "additional_contexts",
    }  # fmt: skip


def test_a_failed_run_exits_non_zero(workdir: Path) -> None:
    (workdir / "spin.py").write_text("print('spinning')\nwhile True:\n    pass\n")
    done = ptc_cli("run", "spin.py", "--wall", "1", "--json", cwd=workdir)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "CODE_RUN_FAILED"
    assert error["message"].startswith("code run failed (")
    assert "spinning" in error["message"]
    (workdir / "boom.py").write_text("return 1/0\n")
    text = ptc_cli("run", "boom.py", cwd=workdir)
    assert text.returncode == 1 and "== error ==\nCODE_RUN_FAILED" in text.stdout
    assert 'File "<program>", line 1' in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.py"], "cannot read the program 'missing.py'"),
        (["run", "program.py", "--tools", "no_such_module:register"], "cannot import"),
        (["run", "program.py", "--tools", "my_tools:nothing"], "has no function 'nothing'"),
        (["run", "program.py", "--tools", "my_tools"], "wants MODULE:FUNC"),
        (["run", "program.py", "--wall", "-1"], "bad limit"),
        (["run", "program.py", "--profile", "lua"], "invalid choice: 'lua'"),
        (["run", "program.py", "--require", "ram"], "--require wants dimensions from filesystem,"),
        (["run", "program.py", "--require", "none,cpu"], "or none; got 'none,cpu'"),
        (["run", "program.py", "--require", ""], "--require wants dimensions"),
        (["run"], "required: program"),
    ],
)
def test_usage_problems_are_one_line_and_status_2(
    workdir: Path, args: list[str], message: str
) -> None:
    done = ptc_cli(*args, cwd=workdir)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("command", [[], ["run"], ["serve"]])
def test_help_reads_as_text(workdir: Path, command: list[str]) -> None:
    done = ptc_cli(*command, "--help", cwd=workdir)
    assert done.returncode == 0
    assert "usage: ptc" in done.stdout
    assert not re.search(r"``|:[a-z]+:`", done.stdout), done.stdout  # no reST markup
    if command == ["run"]:
        assert "what a model would send to run_code (a module;" in " ".join(done.stdout.split())


# E4-old: a Docker profile that refuses Landlock, so filesystem cannot be full there (DESIGN
# section 7: filesystem is full through Landlock only). The host runs `ptc run` as a user would.
SHORT_ENV = "E4-old"
CLI_HOST = """
import json, subprocess, sys
runs = []
for flags in json.load(open(sys.argv[1])):
    done = subprocess.run(
        [sys.executable, "-m", "ptc", "run", "program.py", "--json", "--wall", "10", *flags],
        capture_output=True, text=True,
    )
    runs.append({"status": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
print(json.dumps({"runs": runs}))
"""


def cli_runs(envsim: Harness, *flag_sets: list[str]) -> list[dict[str, Any]]:
    files = {"program.py": "return 1\n"}
    out = envsim.run(SHORT_ENV, CLI_HOST, inputs=flag_sets, files=files).output
    assert out is not None
    runs: list[dict[str, Any]] = out["runs"]
    return runs


def test_a_short_host_fails_closed_naming_the_flag_that_accepts_it(envsim: Harness) -> None:
    default, only_filesystem = cli_runs(envsim, [], ["--require", "filesystem"])
    assert default["status"] == only_filesystem["status"] == 1
    error = json.loads(default["stdout"])["error"]
    assert error["code"] == "CODE_RUN_FAILED" and "(sandbox-unavailable)" in error["message"]
    assert "filesystem is " in error["message"]
    named = re.search(r"\(ptc run / ptc serve: --require ([a-z,]+)\)", error["message"])
    assert named is not None and "filesystem" not in named[1].split(",")
    message = json.loads(only_filesystem["stdout"])["error"]["message"]
    assert "without 'filesystem' (ptc run / ptc serve: --require none)." in message
    # What each message names is what lets the run through.
    for run in cli_runs(envsim, ["--require", named[1]], ["--require", "none"]):
        assert run["status"] == 0, run["stderr"]
        result = json.loads(run["stdout"])
        assert result["value"]["result"] == 1
        assert result["meta"]["enforcement"]["filesystem"]["level"] != "full"
