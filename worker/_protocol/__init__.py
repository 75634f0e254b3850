"""The worker's wires, shared by host and child: JSON read as raw bytes, the frames of the
run channel (framing, a session's state chunks, the frame schemas), the lines of a child's
supervisor line, and what the zygote is asked to fork (the spawn configuration).

Standard library only: the child side, the zygote and the host all import these modules.
This ``__init__`` imports nothing, so importing one module of the group loads only what
that module needs (the child's import discipline, tests/worker/test_layering.py).
"""
