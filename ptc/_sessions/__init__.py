"""Sessions: the store of a session's state (bound to its session, scope, profile and
versions by an HMAC; in memory or as signed files) and the keeper that runs a session's
turns in call order.

No entry: the rest of ``ptc`` imports these modules by name. The model-facing view of a
scope with a session (``scope.session()``) is the scopes' (``_scopes._session_view``).
"""
