"""The one gate every tool call passes, whoever makes it.

The agent's graph, the MCP endpoint and a fault's revert (and whatever runs a
copilot tool next: verified changes, graded labs) run tools through a
:class:`ToolGate`, so the same rules hold whichever way a call comes in:

* **flags** the tools declare in their ``metadata``: ``read_only`` (the only
  tools a read-only gate allows: teaching mode, a read-only MCP key) and
  ``needs_confirmation`` (a call that changes devices runs only under an
  approval that covers exactly it);
* **approval**: :meth:`ToolGate.verify` checks an approval given
  (:class:`~.approval.ApprovalGrant`) against the calls it is applied to, in the
  one digest format (:func:`~.approval.approval_digest`); the tool then finds it
  under :data:`~.approval.APPROVAL_KEY` and the console audit records it;
* **invocation through the error policy** (:class:`ToolErrorPolicy`): a tool fails
  by raising; a call always ends in a :class:`ToolOutcome` (what the model reads,
  the result or the error, the undo of what it changed), never in an exception,
  except LangGraph's interrupts and cancellation, which are re-raised as they are;
* **callbacks around execution**: ``before`` ones may refuse a call (by raising
  :class:`~.errors.ToolError`: its text answers it, nothing runs), ``after`` ones see
  every call's outcome (fault recording), shielded from a cancellation of the run.

A gate is cheap: callers build one per run (or per MCP call) over that run's tools.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.errors import GraphBubbleUp

from ..as_data import json_as_data
from .approval import APPROVAL_KEY, ApprovalGrant, approval_digest

log = logging.getLogger(__name__)

__all__ = [
    "NOT_APPROVED",
    "REJECTED",
    "AfterCall",
    "Approved",
    "BeforeCall",
    "ToolErrorPolicy",
    "ToolGate",
    "ToolOutcome",
    "is_read_only",
    "needs_confirmation",
    "validation_summary",
]

ToolCall = Mapping[str, Any]
"""A LangChain tool call: ``name``, ``args``, ``id`` (MCP's and a revert's have no id)."""
Status = Literal["success", "error", "rejected"]

REJECTED = "Rejected by the user: nothing was sent. Ask what they want instead."
NOT_APPROVED = (
    "Error: the approval given was for other calls than these (its digest differs); nothing was sent. "
    "Ask the user to approve these commands."
)


def is_read_only(tool: BaseTool) -> bool:
    """Tools declare themselves safe for read-only use with ``metadata={"read_only": True}``."""
    return bool((tool.metadata or {}).get("read_only"))


def needs_confirmation(tool: BaseTool) -> bool:
    """Tools that change devices (``metadata={"needs_confirmation": True}``) wait for the user's yes."""
    return bool((tool.metadata or {}).get("needs_confirmation"))


def tool_exception_message(exc: BaseException) -> str | None:
    """LangChain's convention: a ``ToolException``'s text is for the model; anything else is a bug."""
    return str(exc) if isinstance(exc, ToolException) else None


def no_outcome(exc: BaseException) -> Mapping[str, Any] | None:
    """A failed call reports nothing besides its message."""
    return None


@dataclass(frozen=True)
class ToolErrorPolicy:
    """How a gate reads tool failures (the tools' own convention, passed in).

    A tool fails by raising (the call's status is then "error"); whatever it
    returns is a result. ``message(exc)`` is the text the model reads for an
    exception a tool raised, or None for a bug (logged with its traceback; the
    model reads that the tool failed unexpectedly). ``outcome(exc)`` is what a
    failed call still reports, or None: its ``undo``, if any, is the undo of a
    change the call may have half made (fault injection records it).
    """

    message: Callable[[BaseException], str | None] = tool_exception_message
    outcome: Callable[[BaseException], Mapping[str, Any] | None] = no_outcome


@dataclass(frozen=True)
class ToolOutcome:
    """How one call through the gate ended.

    ``output`` is what the model reads (the result as text, or ``Error: ...``);
    ``reason`` a failure's text without that prefix (for a client that words its own);
    ``error`` the exception a failed tool raised; ``undo`` the call that reverts what
    this one changed, when the tool (or its failure) says; ``read_only`` that the call
    was of a tool flagged read-only (it changed nothing, whatever its status).
    """

    call: ToolCall
    status: Status
    output: str
    result: Any = None
    error: BaseException | None = None
    reason: str | None = None
    undo: Mapping[str, Any] | None = None
    read_only: bool = False

    @property
    def name(self) -> str:
        return str(self.call.get("name") or "")

    @property
    def call_id(self) -> str:
        return str(self.call.get("id") or "")


BeforeCall = Callable[[ToolCall], Awaitable[None]]
"""Runs before a call that passed the gate's checks; raising a ``ToolException`` refuses it."""
AfterCall = Callable[[ToolOutcome], Awaitable[None]]
"""Sees every call's outcome, refused ones included (a run's cancellation does not cut it short)."""


@dataclass(frozen=True)
class Approved:
    """An approval verified against the calls it covers (:meth:`ToolGate.verify` makes them)."""

    grant: ApprovalGrant
    covered: frozenset[str]

    def covers(self, call: ToolCall) -> bool:
        return _identity(call) in self.covered


def _identity(call: ToolCall) -> str:
    return json.dumps([call.get("id") or "", call.get("name"), call.get("args") or {}], sort_keys=True, default=str)


def validation_summary(exc: pydantic.ValidationError) -> str:
    """What is wrong with a call's arguments, field by field."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())


def _stringify(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, BaseMessage):
        return str(result.text)  # every text block of its content, joined
    return json_as_data(result)  # as the OpenAI clients serialise; names in it stay data (no raw line separator)


def _undo(result: Any) -> Mapping[str, Any] | None:
    """The call that reverts what a tool call changed, if its result (or failure outcome) gives one."""
    undo = result.get("undo") if isinstance(result, Mapping) else None
    return undo if isinstance(undo, Mapping) else None


class ToolGate:
    """The rules every call of ``tools`` passes (see the module's docstring).

    ``read_only``: only tools flagged read-only may run; ``restriction`` says where
    that holds, for the refusal (``"in teaching mode"``).
    """

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        read_only: bool = False,
        restriction: str = "",
        errors: ToolErrorPolicy | None = None,
        before: Sequence[BeforeCall] = (),
        after: Sequence[AfterCall] = (),
    ) -> None:
        self.tools = list(tools)
        self.read_only = read_only
        self.restriction = restriction
        self.errors = errors or ToolErrorPolicy()
        self.before = tuple(before)
        self.after = tuple(after)
        self._by_name = {t.name: t for t in self.tools}

    @property
    def allowed(self) -> list[BaseTool]:
        """The tools this gate lets run."""
        return [t for t in self.tools if not self.read_only or is_read_only(t)]

    def allows(self, name: str) -> bool:
        tool = self._by_name.get(name)
        return tool is not None and (not self.read_only or is_read_only(tool))

    def tool(self, name: str) -> BaseTool | None:
        return self._by_name.get(name)

    def gated(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """The calls among ``calls`` that may run, but only once the user approves them."""
        return [c for c in calls if self.allows(str(c.get("name"))) and needs_confirmation(self._by_name[c["name"]])]

    @staticmethod
    def digest(calls: Sequence[ToolCall], **scope: str) -> str:
        """The digest an approval of ``calls`` within ``scope`` must carry (:func:`approval_digest`)."""
        return approval_digest(calls, **scope)

    def verify(self, grant: ApprovalGrant | Mapping[str, Any] | None, calls: Sequence[ToolCall], **scope: str) -> Approved | None:
        """``grant`` as an approval of exactly ``calls`` within ``scope``; None when its digest is another's."""
        given = grant if isinstance(grant, ApprovalGrant) else ApprovalGrant.from_mapping(grant)
        if given is None or given.digest != approval_digest(calls, **scope):
            return None
        return Approved(given, frozenset(_identity(c) for c in calls))

    def invalid_arguments(self, call: ToolCall) -> pydantic.ValidationError | None:
        """What the tool's own schema refuses in the call's arguments (checked before anyone approves them)."""
        tool = self._by_name.get(str(call.get("name")))
        schema = tool.args_schema if tool is not None else None
        if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
            try:
                schema.model_validate(dict(call.get("args") or {}))
            except pydantic.ValidationError as exc:
                return exc
        return None

    async def refuse(self, call: ToolCall, output: str, *, status: Status = "error") -> ToolOutcome:
        """Answer ``call`` with ``output`` without running it (a rejection, a mismatched approval)."""
        return await self._ended(ToolOutcome(call, status, output, reason=output))

    async def run(
        self, call: ToolCall, config: RunnableConfig | None = None, *, approved: Approved | None = None
    ) -> ToolOutcome:
        """Run one call, if the gate lets it: allowed, approved when it must be, its arguments valid."""
        name = str(call.get("name") or "")
        tool = self._by_name.get(name)
        if tool is None:
            names = ", ".join(sorted(t.name for t in self.allowed))
            return await self.refuse(call, f"Error: unknown tool {name!r}. Available tools: {names}.")
        if not self.allows(name):
            where = f" {self.restriction}" if self.restriction else ""
            return await self.refuse(call, f"Error: tool {name!r} is not allowed{where} (read-only tools only).")
        if needs_confirmation(tool) and not (approved is not None and approved.covers(call)):
            log.warning("A call of %s without an approval that covers it was refused; nothing was sent", name)
            return await self.refuse(call, NOT_APPROVED)
        if approved is not None and approved.covers(call):
            configurable = {**((config or {}).get("configurable") or {}), APPROVAL_KEY: approved.grant.as_dict()}
            config = {**(config or {}), "configurable": configurable}
        return await self._ended(await self._invoke(tool, call, config))

    async def _invoke(self, tool: BaseTool, call: ToolCall, config: RunnableConfig | None) -> ToolOutcome:
        name = tool.name
        try:
            for before in self.before:
                await before(call)
            result = await tool.ainvoke(dict(call.get("args") or {}), config)
        except GraphBubbleUp:  # an interrupt (or a command) is LangGraph's to handle, never a failure
            raise
        except pydantic.ValidationError as exc:
            reason = f"invalid arguments for {name}: {validation_summary(exc)}"
            return ToolOutcome(call, "error", f"Error: {reason}", error=exc, reason=reason)
        except Exception as exc:  # whatever it is, the call gets an answer
            said = self.errors.message(exc)
            undo = None
            if said is None:  # a bug in a tool: the traceback is for the log only
                log.exception("Tool %s failed", name)
                said = f"{name} failed unexpectedly; the details are in the GNS3 server log."
            else:
                undo = _undo(self.errors.outcome(exc))
            return ToolOutcome(call, "error", f"Error: {said}", error=exc, reason=said, undo=undo)
        return ToolOutcome(call, "success", _stringify(result), result=result, undo=_undo(result))

    async def _ended(self, outcome: ToolOutcome) -> ToolOutcome:
        tool = self._by_name.get(outcome.name)
        if tool is not None and is_read_only(tool):
            outcome = dataclasses.replace(outcome, read_only=True)
        for after in self.after:
            await asyncio.shield(after(outcome))  # what ran is recorded, even if the run is cancelled now
        return outcome
