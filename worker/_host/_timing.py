"""A debug-only timing hook: named marks along a run's critical path.

The latency benchmark installs a recorder with :func:`set_timing_hook` to print the waterfall
of a run (pre-flight, checkout, start frame, program, done, teardown). Nothing in the
packages turns it on; while it is off a mark costs one call that reads one global.
"""

from __future__ import annotations

from collections.abc import Callable

TimingHook = Callable[[str], None]
"""Called with the name of each mark as it passes (on the thread that passes it)."""

_hook: TimingHook | None = None


def set_timing_hook(hook: TimingHook | None) -> TimingHook | None:
    """Install ``hook`` (``None`` turns marks off); returns the previous hook."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def timing_mark(name: str) -> None:
    """Report that a run passed the point ``name`` (no-op unless a hook is installed)."""
    hook = _hook
    if hook is not None:
        hook(name)
