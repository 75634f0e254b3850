"""SDKs are built off the event loop: background builds after changes (debounced),
``prepare()``, ``sdk_async()``, the pending ``run_code``, blocking only when nothing is
ready, and the disk cache a restarted host reads.

Nothing here times anything: "off the event loop" is checked by the thread a build runs
on, "debounced" by how many builds a burst of changes causes, "gives the GIL away" by the
threads that entered :func:`sdkgen.yielding_gil`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
import sdkgen
from worker.testing import FakeBackend

from .helpers import echo_tool

pytestmark = pytest.mark.anyio

PENDING = "The SDK of this scope is being generated"


class Builds:
    """Records every SDK assembly by a generator created during the test (runtimes of
    other tests may still be finishing builds on their own threads): the thread it ran on
    and the tools it covered; every stub of a subset (``stub()``) and the thread it was
    generated on; every thread that entered ``sdkgen.yielding_gil``."""

    def __init__(self) -> None:
        self.generators: list[sdkgen.SdkGenerator] = []
        self.threads: list[str] = []
        self.tool_sets: list[tuple[str, ...]] = []
        self.idents: list[int] = []  # the thread of each generate() and stub(), in order
        self.builders: list[int] = []  # the thread of each generate()
        self.paced: list[int] = []

    def mine(self, generator: sdkgen.SdkGenerator) -> bool:
        return any(generator is mine for mine in self.generators)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Builds]:
    record = Builds()
    original_init = sdkgen.SdkGenerator.__init__
    original = sdkgen.SdkGenerator.generate

    def init(self: sdkgen.SdkGenerator, cache_dir: Path | None = None, **options: Any) -> None:
        original_init(self, cache_dir, **options)
        record.generators.append(self)

    def generate(
        self: sdkgen.SdkGenerator, specs: Sequence[sdkgen.ToolSpec], **options: Any
    ) -> sdkgen.Sdk:
        if record.mine(self):
            record.threads.append(threading.current_thread().name)
            record.tool_sets.append(tuple(sorted(s.name for s in specs)))
            record.idents.append(threading.get_ident())
            record.builders.append(threading.get_ident())
        return original(self, specs, **options)

    original_stub = sdkgen.SdkGenerator.stub

    def stub(
        self: sdkgen.SdkGenerator,
        specs: Sequence[sdkgen.ToolSpec],
        described: Collection[str],
        **options: Any,
    ) -> str:
        if record.mine(self):
            record.idents.append(threading.get_ident())
        return original_stub(self, specs, described, **options)

    original_yielding = sdkgen.yielding_gil

    @contextmanager
    def yielding_gil(every: float = 0.001) -> Iterator[None]:
        record.paced.append(threading.get_ident())
        with original_yielding(every):
            yield

    monkeypatch.setattr(sdkgen.SdkGenerator, "__init__", init)
    monkeypatch.setattr(sdkgen.SdkGenerator, "generate", generate)
    monkeypatch.setattr(sdkgen.SdkGenerator, "stub", stub)
    monkeypatch.setattr(sdkgen, "yielding_gil", yielding_gil)
    yield record


def tool(name: str) -> ptc.ToolDefinition:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return echo_tool(name, input_schema=schema)


# A recursive model needs the type generator and so the disk cache (the common shapes,
# nested objects and references included, are typed without either).
RECURSIVE = {"type": "object", "$defs": {"K": {"type": "object", "properties": {
    "k": {"type": "integer"}, "next": {"$ref": "#/$defs/K"}}}},
    "properties": {"n": {"$ref": "#/$defs/K"}}}  # fmt: skip


def cached_tool(name: str) -> ptc.ToolDefinition:
    return echo_tool(name, input_schema=RECURSIVE)


def runtime(**options: Any) -> ptc.ToolRuntime:
    return ptc.ToolRuntime(
        backend=FakeBackend(), containment=ptc.Containment(require=frozenset()), **options
    )


def description(scope: ptc.Scope) -> str:
    text = scope.view().visible["run_code"].description
    return text


async def test_changes_build_in_the_background_and_prepare_waits_for_it(builds: Builds) -> None:
    async with runtime(default_mode="code") as rt:
        rt.register(tool("alpha"))
        assert builds.threads == []  # register() built nothing itself
        await rt.root.prepare()
        assert builds.threads and all(t.startswith("ptc-sdkgen") for t in builds.threads)
        assert "def alpha(" in description(rt.root) and PENDING not in description(rt.root)
        count = len(builds.threads)
        rt.root.sdk()  # inline discovery: prepare() built the full stub too
        rt.root.model_tools()
        assert len(builds.threads) == count  # ready: nothing built again


async def test_in_search_discovery_prepare_leaves_the_full_stub_to_the_background(
    builds: Builds,
) -> None:
    async with runtime() as rt:
        rt.register(tool("alpha"))
        agent = rt.scope("agent")
        agent.present_as("code", discovery="search")
        await agent.prepare()
        assert "def alpha(" not in description(agent)
        assert "def alpha(" in agent.sdk()  # waits for the background build if need be
        assert "ptc-sdkgen-full_0" in builds.threads


@pytest.mark.parametrize("discovery", ["inline", "search"])
async def test_after_prepare_model_tools_generates_nothing(
    builds: Builds, discovery: ptc.DiscoveryMode
) -> None:
    async with runtime() as rt:
        rt.register(tool("alpha"))
        rt.register(tool("beta"))
        agent = rt.scope("agent")
        agent.present_as("code", discovery=discovery)
        await agent.prepare()
        count = len(builds.idents)
        spec = agent.model_tools()[0]
        assert PENDING not in str(spec["description"])
        assert len(builds.idents) == count  # ready: not built, generated nor waited for
        if discovery == "inline":
            agent.sdk()
            assert len(builds.idents) == count


async def test_sdk_async_waits_off_the_loop_and_sdk_then_answers_at_once(
    builds: Builds,
) -> None:
    async with runtime() as rt:
        rt.register(tool("alpha"))
        agent = rt.scope("agent")
        agent.present_as("code", discovery="search")
        await agent.prepare()
        loop = threading.get_ident()
        full = await agent.sdk_async()
        assert "def alpha(" in full
        assert builds.idents and loop not in builds.idents
        count = len(builds.idents)
        assert agent.sdk() == full
        assert len(builds.idents) == count


async def test_sdk_async_generates_a_subset_off_the_loop(builds: Builds) -> None:
    async with runtime(default_mode="code") as rt:
        rt.register(tool("alpha"))
        rt.register(tool("beta"))
        await rt.root.prepare()
        loop = threading.get_ident()
        count = len(builds.idents)
        part = await rt.root.sdk_async(tools=["alpha"])
        assert "def alpha(" in part and "def beta(" not in part
        assert len(builds.idents) == count + 1 and builds.idents[-1] != loop
        assert builds.paced[-1] == builds.idents[-1]  # paced on its worker thread
        paced = len(builds.paced)
        assert rt.root.sdk(tools=["alpha"]) == part  # the sync one: on this thread...
        assert builds.idents[-1] == loop
        assert len(builds.paced) == paced  # ...which it never gives the GIL away from
        with pytest.raises(ptc.UsageError, match=r"'alpa' \(close: alpha\)"):
            await rt.root.sdk_async(tools=["alpa"])


async def test_background_builds_give_the_gil_away(builds: Builds) -> None:
    async with runtime(default_mode="code") as rt:
        rt.register(tool("alpha"))
        await rt.root.prepare()
        await rt.root.sdk_async()
    assert builds.threads and all(t.startswith("ptc-sdkgen") for t in builds.threads)
    # Every build thread entered yielding_gil (the generator then pauses in its loops).
    assert set(builds.builders) <= set(builds.paced)


async def test_both_builder_threads_start_before_the_first_build(
    builds: Builds, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A builder thread started while the other one builds would keep the event loop
    # waiting in Thread.start() until the busy one hands the GIL over.
    started: list[str] = []
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    generate = sdkgen.SdkGenerator.generate  # the fixture's, which records
    at_first_build: list[list[str]] = []

    def first(self: sdkgen.SdkGenerator, specs: Sequence[sdkgen.ToolSpec], **options: Any) -> Any:
        if builds.mine(self) and not at_first_build:
            at_first_build.append(list(started))
        return generate(self, specs, **options)

    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(sdkgen.SdkGenerator, "generate", first)
    async with runtime(default_mode="code") as rt:
        rt.register(tool("alpha"))
        await rt.root.prepare()
        await rt.root.sdk_async()
    assert builds.threads and at_first_build
    ours = [name.rsplit("_", 1)[0] for name in at_first_build[0] if "ptc-sdkgen" in name]
    assert sorted(ours) == ["ptc-sdkgen", "ptc-sdkgen-full"]
    assert len([name for name in started if "ptc-sdkgen" in name]) == 2  # and no more


async def test_a_burst_of_registrations_is_built_about_once(builds: Builds) -> None:
    async with runtime(default_mode="code") as rt:
        for index in range(200):
            rt.register(tool(f"t{index:03}"))
        await rt.root.prepare()
        assert len(builds.tool_sets[-1]) == 200
        # One debounced flush for the burst (plus, at most, one for a late straggler).
        assert len(builds.tool_sets) <= 2, [len(s) for s in builds.tool_sets]


async def test_present_as_builds_in_the_background(builds: Builds) -> None:
    async with runtime() as rt:
        rt.register(tool("alpha"))
        agent = rt.scope("agent")
        agent.present_as("code")
        assert builds.threads == []
        assert PENDING in description(agent)  # view() never waits for a build
        await agent.prepare()
        assert "def alpha(" in description(agent)


async def test_every_tool_change_reaches_the_sdk(builds: Builds) -> None:
    async with runtime(default_mode="code") as rt:
        dispose = rt.register(tool("alpha"))
        await rt.root.prepare()
        rt.register(tool("beta"))
        await rt.root.prepare()
        assert "def alpha(" in description(rt.root) and "def beta(" in description(rt.root)
        dispose()
        await rt.root.prepare()
        assert "def alpha(" not in description(rt.root) and "def beta(" in description(rt.root)
        agent = rt.scope("agent")
        agent.restrict(deny=["beta"])
        await agent.prepare()
        assert "def beta(" not in agent.sdk()


async def test_sync_sdk_and_model_tools_build_when_nothing_is_ready(builds: Builds) -> None:
    rt = runtime(default_mode="code")  # not entered: no event loop to protect
    rt.register(tool("alpha"))
    spec = rt.root.model_tools()[0]
    assert spec["name"] == "run_code" and "def alpha(" in str(spec["description"])
    assert PENDING not in str(spec["description"])
    await rt.close()


async def test_a_pending_run_code_waits_for_its_sdk_off_the_loop(builds: Builds) -> None:
    async with runtime(default_mode="code") as rt:
        rt.register(tool("alpha"))
        assert PENDING in description(rt.root)
        result = await rt.root.run_code("return tools.alpha(n=3)")
        assert not result.is_error, result.content
        assert result.value == {"result": {"n": 3}, "stdout": ""}
        assert all(t.startswith("ptc-sdkgen") for t in builds.threads)


async def test_a_native_scope_prepares_nothing(builds: Builds) -> None:
    async with runtime() as rt:
        rt.register(tool("alpha"))
        await rt.root.prepare()
        assert builds.threads == []


async def test_a_restarted_host_reads_fragments_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    async with runtime(default_mode="code") as first:
        first.register(cached_tool("alpha"))
        stub = first.root.sdk()
    assert os.listdir(tmp_path), "fragments were written to the cache directory"

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("datamodel-code-generator must not run on a warm disk cache")

    import datamodel_code_generator

    monkeypatch.setattr(datamodel_code_generator, "generate", fail)
    async with runtime(default_mode="code") as second:
        second.register(cached_tool("alpha"))
        assert second.root.sdk() == stub


def tamper_every_file(directory: Path) -> None:
    for path in directory.iterdir():
        data = json.loads(path.read_text())
        data["returns"] = "int:\n    __import__('os').system('true')\n"
        path.write_text(json.dumps(data))


def corrupt_every_file(directory: Path) -> None:
    for path in directory.iterdir():
        path.write_bytes(b"\x00not json")


async def test_unreadable_cache_entries_are_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    async with runtime(default_mode="code") as first:
        first.register(cached_tool("alpha"))
        stub = first.root.sdk()
    corrupt_every_file(tmp_path)
    async with runtime(default_mode="code") as second:
        second.register(cached_tool("alpha"))
        assert second.root.sdk() == stub


async def test_an_unusable_cache_directory_turns_the_disk_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PTC_CACHE_DIR", str(blocker / "cache"))
    async with runtime(default_mode="code") as rt:
        rt.register(tool("alpha"))
        assert "def alpha(" in rt.root.sdk()


async def test_a_scope_closed_before_its_debounced_flush_is_not_built(
    builds: Builds, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptc._code._rebuilds import Rebuilds

    flushed = anyio.Event()
    failures: list[BaseException] = []
    flush = Rebuilds._flush

    def observed(self: Rebuilds) -> Any:
        try:
            return flush(self)
        except BaseException as exc:
            failures.append(exc)
            raise
        finally:
            flushed.set()

    monkeypatch.setattr(Rebuilds, "_flush", observed)
    async with runtime() as rt:
        rt.register(tool("alpha"))
        agent = rt.scope("agent")
        agent.present_as("code")
        agent.register(tool("beta"))
        other = rt.scope("other")
        other.present_as("code")
        # Closed before the flush: the debounce thread cannot run it on the event loop
        # until this task yields.
        agent.close()
        await flushed.wait()
        await other.prepare()
    assert failures == []
    assert ("alpha",) in builds.tool_sets  # the open scope's SDK was built
    assert ("alpha", "beta") not in builds.tool_sets  # the closed one's never was


async def test_tampered_but_valid_json_cache_entries_are_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fragment file edited into valid JSON that would put code into the worker module's
    signatures is not used: the scope's SDK is rebuilt as generation makes it."""
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    async with runtime(default_mode="code") as first:
        first.register(cached_tool("alpha"))
        stub = first.root.sdk()
    tamper_every_file(tmp_path)
    async with runtime(default_mode="code") as second:
        second.register(cached_tool("alpha"))
        assert second.root.sdk() == stub
        result = await second.root.run_code("return tools.alpha(n={'k': 2})")
        assert result.value == {"result": {"n": {"k": 2}}, "stdout": ""}
