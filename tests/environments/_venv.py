"""The test user and the venv every environment's host runs from (both made once, as root).

The user ``ptc-envsim`` (uid 1001 where that is free) is created with ``useradd`` when missing
and never removed. The venv is made from the system interpreter (``/usr/bin/python3.11``: the
default ``python3`` here lives under ``/root``, which other users cannot read) in a
world-readable cache, ``/var/tmp/ptc-envsim`` (``PTC_ENVSIM_CACHE`` overrides it), and holds
this worktree's project installed from a wheel built with ``pip wheel --no-deps``, plus the
project's runtime dependencies and its ``mcp`` extra, installed by root's pip (root's pip
cache) and then made readable by all.

Cache layout, every step under one lock (several worktrees may test at once):

- ``deps-<digest>``: a venv with the dependencies only, keyed by the interpreter and the
  dependency lists of ``pyproject.toml``; built once (about 15 s from a warm pip cache);
- ``ptc-<wheel digest>``: a hard-linked copy of it plus the project's wheel, keyed by the
  digest of the wheel's contents (names and bytes of its members, not the zip's timestamps);
  a copy costs about 2 s and no space for the dependencies;
- ``src-<digest>``: which wheel digest the sources with that digest built, so an unchanged
  tree skips the 5-10 s wheel build.

Entries unused for two days (deps: fourteen) are pruned; only entries of this cache are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3.11"
USER_NAME = "ptc-envsim"
PREFERRED_UID = 1001
"""A restricted Kubernetes pod's ``runAsUser`` in the reference table (E6)."""
CACHE = Path(os.environ.get("PTC_ENVSIM_CACHE", "/var/tmp/ptc-envsim"))
EXTRA = "mcp"
"""The one extra installed too: ``ptc serve`` and the MCP client a host script may drive."""
_MARK = ".ptc-envsim"
_KEEP_DAYS = {"ptc": 2, "deps": 14}
_SOURCES = ("pyproject.toml", "README.md", "ptc", "worker", "sdkgen")
"""What the wheel is built from (``pyproject.toml`` packages ``ptc*``, ``worker*``, ``sdkgen*``
and reads the README)."""


@dataclass(frozen=True)
class TestUser:
    """The non-root identity of E2, E3 and E6."""

    name: str
    uid: int
    gid: int


def unavailable() -> str | None:
    """Why this machine cannot simulate the environments, or ``None``."""
    if os.geteuid() != 0:
        return (
            f"simulating the environments needs root (running as uid {os.geteuid()}): "
            "it creates a test user, mount namespaces and seccomp filters per process"
        )
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"needs the system interpreter {SYSTEM_PYTHON} (world-readable) for the test venv"
    for tool in ("setpriv", "useradd"):
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    return None


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    CACHE.mkdir(mode=0o755, parents=True, exist_ok=True)
    (CACHE / _MARK).touch()
    with open(CACHE / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_user() -> TestUser:
    """The test user, created (uid 1001 where free) if this machine does not have it yet."""
    with _locked():
        try:
            entry = pwd.getpwnam(USER_NAME)
        except KeyError:
            try:
                pwd.getpwuid(PREFERRED_UID)
                uid_args: list[str] = []  # taken: useradd picks the next free uid
            except KeyError:
                uid_args = ["--uid", str(PREFERRED_UID)]
            _run(
                [
                    "useradd",
                    *uid_args,
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                    "--comment",
                    "ptc test user (tests/environments)",
                    USER_NAME,
                ]
            )
            entry = pwd.getpwnam(USER_NAME)
    return TestUser(USER_NAME, entry.pw_uid, entry.pw_gid)


def ensure_venv(work: Path) -> Path:
    """The interpreter of a venv with this worktree's project installed; ``work`` is scratch."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"][EXTRA]]
    deps_key = _digest(json.dumps([SYSTEM_PYTHON, _python_version(), sorted(requirements)]))
    source_key = _source_digest()
    with _locked():
        known = CACHE / f"src-{source_key}"
        if known.is_file():
            venv = CACHE / f"ptc-{known.read_text().strip()}"
            if (venv / _MARK).is_file():
                _use(venv)
                return venv / "bin" / "python"
    wheel = _build_wheel(work)
    wheel_key = _wheel_digest(wheel)
    with _locked():
        deps = CACHE / f"deps-{deps_key}"
        if not (deps / _MARK).is_file():
            _make(deps, lambda tmp: _install_dependencies(tmp, requirements))
        venv = CACHE / f"ptc-{wheel_key}"
        if not (venv / _MARK).is_file():
            _make(venv, lambda tmp: _install_project(deps, tmp, wheel))
        (CACHE / f"src-{source_key}").write_text(wheel_key)
        _use(deps)
        _use(venv)
        _prune()
    return venv / "bin" / "python"


def _make(final: Path, fill: Callable[[Path], None]) -> None:
    """Build ``final`` under a temporary name, readable by all, then rename it into place."""
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    old = os.umask(0o022)
    try:
        fill(tmp)
        _run(["chmod", "-R", "a+rX", str(tmp)])
        (tmp / _MARK).touch()
        shutil.rmtree(final, ignore_errors=True)  # a half-built one from a killed session
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.umask(old)


def _install_dependencies(tmp: Path, requirements: list[str]) -> None:
    _run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(tmp)])
    _pip(tmp, "install", "--quiet", *requirements)


def _install_project(deps: Path, tmp: Path, wheel: Path) -> None:
    # Hard links: the copy shares the dependencies' files (never rewritten: pip only adds the
    # project's files, and a .pyc is replaced by rename), so it costs no space for them.
    shutil.copytree(deps, tmp, symlinks=True, copy_function=os.link)
    (tmp / _MARK).unlink()
    _pip(tmp, "install", "--quiet", "--no-deps", str(wheel))


def _pip(venv: Path, *args: str) -> None:
    # Root's pip (and so root's pip cache and configuration) installs into the test venv.
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *args])


def _build_wheel(work: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the sources (the worktree gets no ``build/``)."""
    source = work / "source"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in _SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    out = work / "wheel"
    shutil.rmtree(out, ignore_errors=True)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)])
    (wheel,) = out.glob("*.whl")
    return wheel


def _wheel_digest(wheel: Path) -> str:
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            h.update(name.encode() + b"\0" + zf.read(name) + b"\0")
    return h.hexdigest()[:20]


def _source_digest() -> str:
    h = hashlib.sha256(_python_version().encode())
    for name in _SOURCES:
        path = ROOT / name
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            rel = file.relative_to(ROOT)
            if file.is_file() and "__pycache__" not in rel.parts and file.suffix != ".pyc":
                h.update(str(rel).encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def _python_version() -> str:
    out = subprocess.run([SYSTEM_PYTHON, "-VV"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _use(entry: Path) -> None:
    (entry / _MARK).touch()


def _prune() -> None:
    """Remove this cache's entries unused for their keep time (caller holds the lock)."""
    now = time.time()
    for entry in CACHE.iterdir():
        if ".tmp-" in entry.name and now - entry.stat().st_mtime > 86400:
            shutil.rmtree(entry)  # left by a session killed while it built
            continue
        kind, _, rest = entry.name.partition("-")
        if kind in _KEEP_DAYS and rest and ".tmp-" not in rest and (entry / _MARK).is_file():
            if now - (entry / _MARK).stat().st_mtime > _KEEP_DAYS[kind] * 86400:
                shutil.rmtree(entry)
    for index in CACHE.glob("src-*"):
        if not (CACHE / f"ptc-{index.read_text().strip()}").is_dir():
            index.unlink()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _run(argv: list[str]) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:6])} ... failed ({out.returncode}):\n{out.stderr[-4000:]}"
        )
