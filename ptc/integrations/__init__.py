"""ptc inside an agent framework's own loop: one thin adapter per framework, each behind an
extra of its own (``ptc[pydantic-ai]``, ``ptc[openai-agents]``, ``ptc[langchain]``,
``ptc[anthropic]``, ``ptc[otel]``).

Import the adapter you need (``from ptc.integrations import pydantic_ai``); this package
imports none of them, and ``import ptc`` never imports a framework. Each adapter shows the
model exactly ``scope.model_tools()``, routes every call to ``scope.call`` with the
framework's own tool call id, and maps ptc's errors, approvals and cancellation onto the
framework's own mechanisms; ptc keeps the policy and the containment. See
docs/integrations.md.
"""
