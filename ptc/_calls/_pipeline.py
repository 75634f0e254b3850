"""One call through the pipeline (docs/guide.md, "The pipeline"): :class:`Call` owns the stages and
their order.

``Call.create`` is step 1 (identity, lossless frozen arguments, visibility, mode collapse,
schema check); :meth:`Call.run` does the rest in order: pre-execute, approver, guards and
signal checks (2-4), the execute waterfall and the body (5-6), post-execute (7) and the
finish (8). A scheduler changes *when* stages may start (``admission``, ``prepare_lock``),
never their order. Everything a call needs from its scope comes in a :class:`CallSite`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, replace

import anyio

from .._errors import NotJSONError, UsageError
from .._json import EMPTY, JSON, FrozenDict, freeze
from .._results import ErrorCode, ToolResult, error_result
from .._schema import drop_optional_nulls
from .._signals import CancelSignal
from ._body import apply_finalize_content, attempt, check_output
from ._decisions import Approver
from ._events import (
    EXECUTE,
    POST_EXECUTE,
    PRE_EXECUTE,
    RESULT,
    AnyListener,
    Event,
    ListenerError,
    Listeners,
    emit,
    run_waterfall,
)
from ._policy import ABORTED_BEFORE_DISPATCH, Guard, Refusal, decide, post_execute, refusal_result
from ._tools import RUN_CODE, ExecutionToken, ScopeRef, ToolDefinition, ToolExecution

__all__ = ("Call", "CallSite", "Unstarted", "aborted_before_dispatch", "new_call_id")

_ids = itertools.count(1)
_prefix = os.urandom(4).hex()


def aborted_before_dispatch(call_id: str, name: str) -> ToolResult:
    """The result of a call that never began (not emitted: nothing of it ran)."""
    refusal = ABORTED_BEFORE_DISPATCH
    return error_result(call_id, name, refusal.code, refusal.message)


def new_call_id() -> str:
    return f"call_{_prefix}_{next(_ids)}"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallSite:
    """What a call needs from the scope it is made in (resolved by the scope, cached until
    the next change): visible tools, guards (root first, then farthest to nearest), mode
    collapse, the listener registry and the chain that scopes it, the approver."""

    scope: ScopeRef
    chain: tuple[object, ...]
    visible: Mapping[str, ToolDefinition]
    guards: tuple[Guard, ...]
    collapse: bool
    """The scope presents as ``code``: direct calls of native tools end as ``UNKNOWN_TOOL``."""
    registry: Listeners
    approver: Approver | None

    def listeners(self, event: Event) -> list[AnyListener]:
        return self.registry.for_chain(event, self.chain)


class Unstarted(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by a scheduler's admission when the call was abandoned before it started."""


class Call:
    """One call between its stages. ``result`` set and ``final`` true: skip to the finish."""

    __slots__ = ("definition", "execution", "final", "result", "signal", "site")

    def __init__(self, site: CallSite, execution: ToolExecution, signal: CancelSignal | None):
        self.site = site
        self.execution = execution
        self.signal = signal
        self.definition: ToolDefinition | None = None
        self.result: ToolResult | None = None
        self.final = False

    # -- step 1 -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        site: CallSite,
        name: str,
        arguments: object,
        *,
        call_id: str | None = None,
        root_call_id: str | None = None,
        parent: ExecutionToken | None = None,
        signal: CancelSignal | None = None,
    ) -> Call:
        """Identity, lossless frozen arguments, visibility, mode collapse, schema check."""
        call_id = call_id or new_call_id()
        problem: str | None = None
        frozen: JSON = None
        try:
            frozen = freeze(arguments)
        except NotJSONError as exc:
            problem = f"not lossless JSON: {exc}"
        if problem is None and not isinstance(frozen, FrozenDict):
            problem = "$: must be an object"
        execution = ToolExecution(
            call_id=call_id,
            root_call_id=root_call_id or call_id,
            name=name,
            arguments=frozen if isinstance(frozen, FrozenDict) else EMPTY,
            scope=site.scope,
            token=ExecutionToken(),
            parent=parent,
            signal=signal if signal is not None else CancelSignal(),
        )
        call = cls(site, execution, signal)
        if problem is not None:
            call.end("INVALID_ARGS", f"invalid arguments for `{name}`: {problem}")
            return call
        definition = site.visible.get(name)
        if definition is None and name == RUN_CODE:
            call.end(
                "UNKNOWN_TOOL",
                f"unknown tool `{name}`: this scope presents its tools natively; call"
                f' `present_as("code")` (or `"both"`) on it to offer `{name}`',
            )
        elif definition is None:
            call.end("UNKNOWN_TOOL", f"unknown tool `{name}`")
        elif name == RUN_CODE and parent is not None:
            call.end("UNKNOWN_TOOL", f"`{RUN_CODE}` cannot be called from inside a program")
        elif parent is None and name != RUN_CODE and site.collapse:
            if signal is not None and signal.cancelled:
                call.end(ABORTED_BEFORE_DISPATCH.code, ABORTED_BEFORE_DISPATCH.message)
            else:
                call.end(
                    "UNKNOWN_TOOL",
                    f"unknown tool `{name}`: only `{RUN_CODE}` is callable directly"
                    f" — call `{name}` from inside a `{RUN_CODE}` program instead",
                )
        else:
            call.definition = definition
            problems = definition.input_validator.problems(execution.arguments)
            if problems:
                problems = call.drop_optional_nulls(definition)
            if problems:
                call.end("INVALID_ARGS", f"invalid arguments for `{name}`: " + "; ".join(problems))
        return call

    def drop_optional_nulls(self, definition: ToolDefinition) -> list[str]:
        """A ``null`` for an optional parameter whose schema does not allow it means "not
        sent" (what a strict-mode model sends for what it leaves out): drop such ``null``s
        and validate again; the problems of the original arguments if that does not help."""
        arguments = self.execution.arguments
        dropped = drop_optional_nulls(definition.input_schema, arguments)
        if dropped is arguments:
            return definition.input_validator.problems(arguments)
        frozen = freeze(dropped)
        assert isinstance(frozen, FrozenDict)
        if definition.input_validator.problems(frozen):
            return definition.input_validator.problems(arguments)
        self.execution = replace(self.execution, arguments=frozen)
        return []

    def end(self, code: ErrorCode, message: str) -> None:
        """End the call early: straight to the finish, skipping the waterfalls."""
        self.result = error_result(self.execution.call_id, self.execution.name, code, message)
        self.final = True

    @property
    def suspended(self) -> bool:
        """Its approval was deferred: the run it belongs to is being suspended."""
        error = self.result.error if self.result is not None else None
        return error is not None and error.code == "SUSPENDED"

    @property
    def parallel(self) -> bool:
        """Fail-closed classification, asked after argument validation: exactly ``True``."""
        definition = self.definition
        if self.final or definition is None or definition.name == RUN_CODE:
            return False
        safe = definition.concurrency_safe
        if safe is None or isinstance(safe, bool):
            return safe is True
        try:
            return safe(self.execution.arguments) is True
        except Exception:
            return False

    # -- steps 2-8, in order ------------------------------------------------------------

    async def run(
        self,
        *,
        admission: AbstractAsyncContextManager[object] | None = None,
        prepare_lock: AbstractAsyncContextManager[object] | None = None,
        prepared: Callable[[], None] | None = None,
        halt: CancelSignal | None = None,
    ) -> ToolResult:
        """Run the rest of the pipeline and return the frozen result.

        ``admission`` is held from pre-execute through post-execute (it may raise
        :class:`Unstarted`: the result is then ``ABORTED_BEFORE_DISPATCH``, not emitted);
        ``prepare_lock`` keeps pre-execute phases from overlapping; ``prepared`` is called
        once pre-execute is over (or skipped). ``halt`` (a run being suspended) keeps a call
        that has not begun pre-execute from beginning it, and is fired when this call's
        approval is deferred; a suspended call's result is not emitted.

        Cancelling the caller's task ends a call that began pre-execute as ``ABORTED`` (or
        ``ABORTED_BEFORE_DISPATCH`` before its body), emits its result shielded from the
        cancellation, and re-raises it.
        """
        stage = "unstarted"  # how far it got, should its caller's task be cancelled
        try:
            if not self.final:
                try:
                    async with admission if admission is not None else nullcontext():
                        async with prepare_lock if prepare_lock is not None else nullcontext():
                            if halt is not None and halt.cancelled:
                                raise Unstarted
                            stage = "preparing"
                            await self._prepare()
                        if self.suspended:
                            if halt is not None:
                                halt.cancel("a call's approval was deferred")
                            assert self.result is not None
                            return self.result
                        if prepared is not None:
                            prepared()
                            prepared = None
                        if self.result is None:
                            stage = "dispatched"
                            await self._dispatch()
                        if not self.final:
                            stage = "dispatched"
                            await self._post_execute()
                except Unstarted:
                    return aborted_before_dispatch(self.execution.call_id, self.execution.name)
        except anyio.get_cancelled_exc_class():
            if stage == "unstarted":
                raise
            # The caller's task was cancelled: a started call still ends, as ABORTED, and its
            # result is still emitted (a trace or log never holds a child without a parent);
            # then the cancellation goes on to the caller.
            self._end_cancelled(dispatched=stage == "dispatched")
            with anyio.CancelScope(shield=True):
                await self._finish()
            raise
        finally:
            if prepared is not None:
                prepared()
        return await self._finish()

    def _end_cancelled(self, *, dispatched: bool) -> None:
        name = self.execution.name
        call_id = self.execution.call_id
        if dispatched:
            message = "tool call aborted: the calling task was cancelled"
            self.result = error_result(call_id, name, "ABORTED", message)
        else:
            message = f"{ABORTED_BEFORE_DISPATCH.message}: the calling task was cancelled"
            self.result = error_result(call_id, name, ABORTED_BEFORE_DISPATCH.code, message)
        self.final = True

    async def _prepare(self) -> None:
        refusal: Refusal | None = await decide(
            self.execution,
            listeners=self.site.listeners(PRE_EXECUTE),
            approver=self.site.approver,
            guards=self.site.guards,
            signal=self.signal,
        )
        if refusal is None:
            return
        self.result = refusal_result(self.execution, refusal)
        self.final = refusal.final  # a denial still passes post-execute

    async def _dispatch(self) -> None:
        """Steps 5-6: the execute around-waterfall, the body and its output."""
        definition = self.definition
        assert definition is not None
        execution = self.execution
        caller = self.signal
        produced: list[ToolResult] = []

        async def innermost(current: ToolExecution) -> ToolResult:
            result = await attempt(definition, current, caller)
            produced.append(result)
            return result

        listeners = self.site.listeners(EXECUTE)
        if not listeners:
            result = await innermost(execution)
        else:
            try:
                result = await run_waterfall(
                    listeners, execution, innermost, _is_result, amend=_swap_signal
                )
            except ListenerError as exc:
                result = error_result(
                    execution.call_id,
                    definition.name,
                    "TOOL_ERROR",
                    f"execute listener failed: {exc}",
                )
            else:
                if not any(result is r for r in produced) and not result.is_error:
                    # A wrapper made its own result: it passes the output contract too.
                    result = check_output(
                        definition,
                        execution.call_id,
                        result.value,
                        result.meta,
                        presentation=execution.parent is None,
                    )
        if caller is not None and caller.cancelled:
            error = result.error
            if error is None or error.code != "ABORTED":
                result = error_result(
                    execution.call_id, definition.name, "ABORTED", "tool call aborted"
                )
        self.result = result

    async def _post_execute(self) -> None:
        assert self.result is not None
        self.result = await post_execute(
            self.execution, self.result, self.definition, self.site.listeners(POST_EXECUTE)
        )

    async def _finish(self) -> ToolResult:
        """Step 8: tool-owned ``finalize_content`` once, then emit ``tools/result``."""
        result = self.result
        assert result is not None
        if self.definition is not None and self.definition.finalize_content is not None:
            result = apply_finalize_content(self.definition, result)
        self.result = result
        listeners = self.site.listeners(RESULT)
        if listeners:
            await emit(listeners, result, RESULT)
        return result


def _is_result(out: object) -> bool:
    return isinstance(out, ToolResult)


def _swap_signal(execution: ToolExecution, changes: dict[str, object]) -> ToolExecution:
    signal = changes.pop("signal", None)
    if changes:
        raise UsageError(f"next() takes only signal=, got {sorted(changes)}")
    if signal is None:
        return execution
    if not isinstance(signal, CancelSignal):
        raise UsageError("next(signal=...) takes a ptc.CancelSignal")
    return replace(execution, signal=signal)


def results_in_order(results: Sequence[ToolResult | None]) -> list[ToolResult]:
    """Every slot filled: the scheduler's results in submission order."""
    out = [r for r in results if r is not None]
    assert len(out) == len(results)
    return out
