"""The running summary's hand-offs around each model call of a run.

The summary of the turns that left the history window is written beside the
conversation (:class:`~..summary_writer.SummaryWriter` makes the calls), never
before a question. Around each model call the graph asks a
:class:`SummaryCoordinator`:

* :meth:`~SummaryCoordinator.make_way`: the run talks to its model server from
  here, so a background summary call to the same one-slot server gives way;
* :meth:`~SummaryCoordinator.take_landed`: the summary to send, one written in the
  background since if it covers more (taken when a turn starts);
* :meth:`~SummaryCoordinator.after_prepare`: the request planned the next cut (write
  the summary now, so it is ready when the cut comes) or made a cut the summary was
  not ready for (write it; it lands at a later call);
* a summary that lands after its run is stored with the session's state
  (:meth:`~SummaryCoordinator.bind` gives it the compiled graph).

:func:`write_summary` is the background job itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from ..context.counting import TokenCounter, content_text
from ..context.summary import clean_summary, count_turns, restore_summary, summary_bounds, summary_request
from ..context.tokenizer import DEFAULT_ENCODING
from ..usage import add_usage, sum_usage
from .writer import CallOut, SummaryGaveWayError, SummaryWriter

log = logging.getLogger(__name__)

__all__ = ["SummaryCoordinator", "covers", "write_summary"]

Summarize = Callable[[list[BaseMessage]], Awaitable[AIMessage]]


def covers(summary: Any, until: int) -> bool:
    """``summary`` (a stored value) already covers the history up to ``until``."""
    return isinstance(summary, Mapping) and isinstance(summary.get("until"), int) and summary["until"] >= until


async def write_summary(
    summarize: Summarize,
    timeout: float,
    messages: Sequence[BaseMessage],
    previous: Mapping[str, Any] | None,
    window: Mapping[str, Any],
    report: Mapping[str, Any],
    call_out: CallOut | None = None,
) -> tuple[dict[str, Any], dict[str, int]] | None:
    """Fold the turns that left the window into the running summary; None when that fails.

    Runs in the background (:class:`SummaryWriter`), ahead of a planned cut or after a
    cut it was not ready for (that question has already gone out with the plain cut).
    The turns summarised are those between the end of the previous summary and
    ``window["start"]`` (the planned or the new start), so turns a failed call could not
    summarise are tried again at the next cut. A failure or a timeout logs a line.
    ``call_out`` makes the model call (the writer's: it may wait for the model server,
    and send it again after giving way to a question); ``timeout`` bounds each call.
    """
    start = window.get("start", 0)
    restored = restore_summary(previous, messages)
    since = restored["until"] if restored else 0
    if not isinstance(start, int) or start <= since:
        return None
    dropped = list(messages[since:start])
    encoding = report.get("encoding", DEFAULT_ENCODING)
    # Bounded by the model's own budget: an 8K model gets a short summary and a short request.
    max_tokens, max_input = summary_bounds(int(report.get("message_budget") or 0))

    def prepare() -> tuple[TokenCounter, list[BaseMessage]]:
        counter = TokenCounter(encoding)  # may load the tokenizer's files: never on the event loop
        return counter, summary_request(restored["text"] if restored else None, dropped, counter, max_input, max_tokens)

    counter, request = await asyncio.to_thread(prepare)

    def call() -> Awaitable[AIMessage]:
        return asyncio.wait_for(summarize(request), timeout)

    try:
        reply = await (call_out(call) if call_out is not None else call())
    except SummaryGaveWayError as exc:
        log.info("Summary of %d dropped message(s) not written: %s; its turns are summarised at the next cut",
                 len(dropped), exc)
        return None
    except TimeoutError:
        log.warning("Summary of %d dropped message(s) timed out after %.0f s; the plain cut stays until the next cut",
                    len(dropped), timeout)
        return None
    except Exception as exc:  # noqa: BLE001  # any provider error: the conversation goes on with the plain cut
        log.warning("Summary of %d dropped message(s) failed (%s); the plain cut stays until the next cut",
                    len(dropped), type(exc).__name__)
        return None
    text = await asyncio.to_thread(clean_summary, content_text(reply.content), counter, max_tokens)
    if not text:
        log.warning("Summary of %d dropped message(s) came back empty; keeping the plain cut", len(dropped))
        return None
    turns = (restored["turns"] if restored else 0) + count_turns(dropped)
    tokens = await asyncio.to_thread(counter.text, text)
    log.info("Conversation summary updated: %d turn(s) summarised in %d tokens", turns, tokens)
    summary = {"text": text, "until": start, "until_id": window.get("start_id"), "turns": turns}
    return summary, add_usage({}, reply)


class SummaryCoordinator:
    """One graph's side of the running summary (see the module's docstring); inert without ``summarize``.

    ``server``: the lab's own model server (often one request at a time), which a
    background summary call waits for and gives way on.
    """

    def __init__(
        self, summarize: Summarize | None, writer: SummaryWriter | None, timeout: float, server: str | None = None
    ) -> None:
        if summarize is not None and writer is None:
            raise ValueError("AgentSettings.summarize needs a summary_writer (it writes summaries in the background)")
        self._summarize = summarize
        self._writer = writer
        self._timeout = timeout
        self._server = server
        self._graph: CompiledStateGraph | None = None
        self._node = ""

    def bind(self, graph: CompiledStateGraph, node: str) -> None:
        """The compiled graph whose state a summary landing after its run is stored in (as ``node``'s update)."""
        self._graph, self._node = graph, node

    def make_way(self) -> None:
        if self._writer is not None and self._server is not None:
            # This run talks to its model server from here: a background summary call out to the same
            # server (one slot, often) would make its question wait, up to the summary's timeout.
            # (A no-op after the run's first call: summaries started since wait for it to end.)
            self._writer.make_way(self._server)

    def take_landed(
        self, thread_id: str, messages: Sequence[BaseMessage], current: Any, run_usage: dict[str, int]
    ) -> Any:
        """The summary to send: one written in the background since, if it covers more than ``current``.

        A new summary is taken when a turn starts (the last message is the user's); the hook
        then places it (``summary.place_summaries``): with the cut it was written for, or on
        that question, part of what this request adds anyway, so landing costs the prompt
        cache nothing; within a tool round the previous one stays. Its usage is added to
        ``run_usage`` (once, in the run that sends it first).
        """
        landed = self._writer.landed(thread_id) if self._writer is not None else None
        new_turn = bool(messages) and isinstance(messages[-1], HumanMessage)
        if (
            new_turn and landed is not None and not covers(current, landed.summary["until"])
            and restore_summary(landed.summary, messages) is not None
        ):
            run_usage.update(sum_usage(run_usage, landed.usage))
            landed.usage = {}
            log.info("A summary written in the background is sent from this call on (%d turn(s))",
                     landed.summary.get("turns", 0))
            return landed.summary
        return current

    def after_prepare(
        self, thread_id: str, messages: Sequence[BaseMessage], summary: Any, window: Any, report: Mapping[str, Any]
    ) -> None:
        """Start writing the summary a prepared request calls for, if any."""
        if not isinstance(window, Mapping):
            return
        if report.get("cut_planned"):
            # Written now, in the background, so that it is ready when the planned cut comes.
            self._start(thread_id, messages, summary, {"start": window["planned"], "start_id": window.get("planned_id")},
                        report)
        elif report.get("window_moved") and not covers(summary, window["start"]):
            # A cut the summary was not ready for: the question goes out now with the plain
            # cut; the summary of what it dropped lands at a later call.
            self._start(thread_id, messages, summary, window, report)

    def _start(
        self, thread_id: str, messages: Sequence[BaseMessage], summary: Any, window: Mapping[str, Any],
        report: Mapping[str, Any],
    ) -> None:
        summarize, writer = self._summarize, self._writer
        if summarize is None or writer is None:
            return
        landed = writer.landed(thread_id)
        if landed is not None and not covers(summary, landed.summary["until"]):
            summary = landed.summary  # came back but not sent yet: the new one builds on it
        snapshot, bounds, timeout = list(messages), dict(window), self._timeout

        async def write(call_out: CallOut) -> tuple[dict[str, Any], dict[str, int]] | None:
            return await write_summary(summarize, timeout, snapshot, summary, bounds, report, call_out)

        async def store(new: dict[str, Any]) -> bool:
            return await self._store(thread_id, new)

        writer.start(thread_id, write, store, server=self._server)

    async def _store(self, thread_id: str, new: dict[str, Any]) -> bool:
        """Save a summary that landed after its run into the session's state (True: done or moot).

        Only a conversation at rest gets it this way; one that waits for an approval
        (or was cut in a tool round) keeps it in memory for its next run to take.
        """
        graph = self._graph
        assert graph is not None  # bound when the graph was compiled
        thread: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        snapshot = await graph.aget_state(thread)
        values = snapshot.values or {}
        if covers(values.get("context_summary"), new["until"]):
            return True
        if snapshot.next:
            return False
        if restore_summary(new, list(values.get("messages") or [])) is None:
            return True  # the history changed under it: nothing to keep
        await graph.aupdate_state(thread, {"context_summary": new}, as_node=self._node)
        log.info("Conversation summary written after its run ended; stored with the session")
        return True
