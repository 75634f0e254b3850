"""The run's supervisor: the zygote (its domain, set up once for every child; one fork per
run; the reaping and the exit report; the cleanup after a host that died), what the forked
child does to itself before the program (isolate, confine), and the scratch keeper that
holds the children's scratch quotas where no tmpfs can be mounted.

Everything here runs in the zygote's process or in its forks, so it imports only the
standard library, pyseccomp and what the zygote preloads. This ``__init__`` imports
nothing: the zygote's boot names ``worker._supervisor._zygote`` directly.
"""
