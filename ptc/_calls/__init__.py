"""Calls and the pipeline: a tool's definition and ``@tool``, the decisions and events a
call goes through, the one pipeline that owns a call's stages and their order, and the
scheduler that says when a call may start them.

No entry: the rest of ``ptc`` imports these modules by name. Nothing here knows scopes,
sessions or code mode.
"""
