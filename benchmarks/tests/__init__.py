"""The benchmarks' own tests: their parts (host facts, reports, scoring, the command line),
run by ``make test`` beside ``tests/``, which tests the packages and imports no benchmark.
The suites themselves are run end to end through their command line by
``tests/e2e/test_benchmark_commands.py``."""
