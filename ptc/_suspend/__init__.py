"""Suspended runs: a paused ``run_code`` run's record (JSON) and the stores that keep it,
in memory or as signed files for a host that restarts.

No entry: the rest of ``ptc`` imports these modules by name.
"""
