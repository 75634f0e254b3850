"""Code mode: a scope's SDK and catalog (built off the event loop, inline or search
discovery), the model-facing text of ``run_code``, and its runs (pre-flight, nested calls
in batches through the scheduler, the dispatch log, live output, pauses and replay).

No entry: the runtime imports ``_codemode.CodeMode`` by name; nothing else outside the
folder needs code mode's modules.
"""
