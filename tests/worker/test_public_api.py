"""The public surface of worker is pinned."""

from __future__ import annotations

import subprocess
import sys

import worker


def test_all_names_are_exported_and_nothing_else_is_public() -> None:
    assert worker.__all__ == (
        "DIMENSIONS",
        "FAILURE_KINDS",
        "HOST_OPERATIONS",
        "HOST_OPERATION_MARK",
        "MAX_PROGRAM_BYTES",
        "SESSION_SAVED_KINDS",
        "CallBatch",
        "CallHandler",
        "CallReply",
        "CallRequest",
        "CallStarter",
        "CapturedOutput",
        "CompileFailure",
        "Containment",
        "Dimension",
        "Enforcement",
        "FailureKind",
        "JsonValues",
        "Limits",
        "OutputCapture",
        "Pacer",
        "Profile",
        "ProtocolError",
        "RunOutcome",
        "RunRequest",
        "RunStats",
        "SessionSave",
        "StdoutListener",
        "SubprocessBackend",
        "TimingHook",
        "WorkerBackend",
        "WorkerError",
        "compile_program",
        "parse_program",
        "program_size_problem",
        "set_timing_hook",
        "timing_mark",
    )
    for name in worker.__all__:
        assert hasattr(worker, name), name
    # `testing` (the fake backend) and `ray` (the extra) are public submodules, attributes
    # of the package once some test has imported them; everything else is private.
    public = {n for n in vars(worker) if not n.startswith("_")} - {"testing", "ray"}
    assert public == set(worker.__all__)


def test_importing_worker_imports_neither_ptc_nor_restrictedpython() -> None:
    code = (
        "import sys, worker, worker.testing; "
        "print(sorted({'ptc', 'RestrictedPython'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_entry_point_says_what_the_caller_gets() -> None:
    from tests._docstrings import private_references, undocumented

    assert undocumented(worker) == []
    assert private_references(worker) == []
