"""The child side of a worker: the runtime a contained child runs for one program.

Imports only the standard library and RestrictedPython (the zygote preloads both), so a
forked child starts running at once. The zygote calls :func:`serve` with the child's end
of the channel and the enforcement facts it applied.
"""

from ._runtime import serve as serve

__all__ = ("serve",)
