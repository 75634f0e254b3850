"""The host side of the subprocess backend: the host's ends of a child's channels, its
cgroups and handle, the run loop that drives one run, the pool of children, the zygote's
client, and ``SubprocessBackend`` itself (with the pacing and the timing hook they share).

Runs in the host's process (asyncio through anyio); never imported by the child side or
the zygote. This ``__init__`` imports nothing (``worker/__init__.py`` is the public face).
"""
