"""Benchmarks: the native-vs-code task suite and the latency suite (``python -m benchmarks``)."""
