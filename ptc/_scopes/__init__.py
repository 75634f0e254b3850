"""Scopes: a scope's own layer and the visibility algorithm, ``present_as``'s options,
what the scopes of one runtime share (the tree), the session view of a scope, the
code-mode half of a scope's API, and ``Scope`` itself.

No entry: the rest of ``ptc`` imports these modules by name. Scopes never see the runtime
or code mode; they reach code mode through the tree's ``CodeModeHooks``.
"""
