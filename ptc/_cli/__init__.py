"""The ``ptc`` command's subcommands: ``run`` and ``serve``, and what they share.

``ptc/__main__.py`` is the group's only entry (the ``ptc`` command); nothing else in
``ptc`` imports these modules.
"""
