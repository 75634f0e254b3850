"""The kernel mechanisms containment is built from: the Linux calls ``os`` lacks (through
the one libc handle), capabilities, Landlock, classic BPF and the seccomp filters (the
per-child pid filter and the scratch write gate's), and the report of what applied.

Used by the zygote, the scratch keeper and the child (in the zygote's forks) and read by
the host (the enforcement report, the cgroup files). This ``__init__`` imports nothing.
"""
