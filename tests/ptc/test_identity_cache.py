"""IdentityCache: values found again by the very objects they were made from."""

from __future__ import annotations

import gc
import threading

from ptc._identity_cache import IdentityCache


class Source:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Source)  # every Source is equal: identity must decide

    __hash__ = object.__hash__


def test_a_value_is_found_by_the_same_objects_not_by_equal_ones() -> None:
    cache: IdentityCache[str] = IdentityCache(10)
    a, b = Source(), Source()
    assert cache.put((a, b), "ab") == "ab"
    assert cache.get((a, b)) == "ab"
    assert cache.get((b, a)) is None and cache.get((Source(), b)) is None
    assert cache.get((a, b), extra="python") is None
    cache.put((a, b), "ab-restricted", extra="restricted")
    assert cache.get((a, b), extra="restricted") == "ab-restricted"


def test_an_entry_keeps_its_sources_so_their_ids_are_not_reused() -> None:
    cache: IdentityCache[int] = IdentityCache(10)
    cache.put((Source(),), 1)  # the only reference to the source is the entry's
    gc.collect()
    assert all(cache.get((Source(),)) is None for _ in range(1000))


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: IdentityCache[int] = IdentityCache(2)
    a, b, c = Source(), Source(), Source()
    cache.put((a,), 1)
    cache.put((b,), 2)
    assert cache.get((a,)) == 1  # a is now the most recent
    cache.put((c,), 3)
    assert (cache.get((a,)), cache.get((b,)), cache.get((c,)), len(cache)) == (1, None, 3, 2)


def test_threads_share_it_safely() -> None:
    cache: IdentityCache[int] = IdentityCache(50)
    sources = [Source() for _ in range(200)]

    def work() -> None:
        for i, source in enumerate(sources):
            assert cache.get((source,)) in (None, i)
            cache.put((source,), i)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50
