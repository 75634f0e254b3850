"""The Ray bridge behind ``worker.ray`` (extra ``ptc[ray]``): the wire format, the node's
actor, the host's view of the cluster and one remote run.

``worker/ray.py`` is the group's only entry; nothing else in ``worker`` imports these
modules, and ``import worker`` never does.
"""
