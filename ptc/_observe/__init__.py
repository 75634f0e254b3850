"""Observing calls: ``EventLog``, a JSONL record of every call attached as ordinary
listeners, and reading such a log back into call trees (``ptc tree``).

No entry: the public face imports ``EventLog``, the ``ptc`` command the call tree.
"""
