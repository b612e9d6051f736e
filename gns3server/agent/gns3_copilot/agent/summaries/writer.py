"""Running summaries written in the background, so that no question waits for one.

When the history window plans its next cut (or cuts with no summary ready),
the graph hands the summary call to a :class:`SummaryWriter` and sends the
question at once. The summary *lands* when the call returns: the graph reads it before its next model
call (of the same run or of the next turn), and it is stored with the session
(``store``, given by whoever started it) as soon as no run of that session is
in progress. Rules, per session:

- one writer at a time: a cut while a summary is still being written starts no
  second one (its turns are summarised at the next cut, as after a failure);
- for the lab's own model server (``server``: ``agent/server/local.py``, often
  one request at a time), the summary's model call waits until no run talks to that
  server, so it never overlaps a conversation's model calls (this session's or
  another's): such a server queues the second request or, as llama-cpp-python's
  does by default (``interrupt_requests``), ends the answer it is streaming;
- and once it is out, a run that starts talking to that server makes it give way
  (:meth:`make_way`): the question would otherwise queue behind it for up to the
  summary's timeout. Only the model call is cancelled (what came back is never
  thrown away), and it is sent again once the server is free (at most
  :data:`MAX_GIVE_WAYS` times; then its turns are summarised at the next cut);
- each model call is bounded by the caller's timeout (not the wait for a busy
  server: that lasts until no run talks to it), and
  :meth:`cancel` (a deleted session) and :meth:`close` (the server stopping)
  end every task cleanly: landed summaries are stored first, unfinished calls
  are cancelled;
- storing happens under the session's lock; a run waits for that lock
  (:meth:`idle`) before it reads the session's state, so a store and a run
  never write the same session at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ...errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

Summary = dict[str, Any]
Written = tuple[Summary, Mapping[str, int]]
T = TypeVar("T")

MAX_GIVE_WAYS = 3
"""How often one summary's model call is sent again after giving way to a question (once more, and
it is left for the next cut)."""


class CallOut(Protocol):
    """Makes one model call for a summary (``call()`` builds it): where the server is one of
    its own, only once no run talks to it, and again after giving way to a question."""

    async def __call__(self, call: Callable[[], Awaitable[T]]) -> T: ...


class SummaryGaveWayError(CopilotError):
    """A summary's model call gave way to a question every time it was sent: its turns wait for the next cut."""

    code = "summary_gave_way"
    kind = ErrorKind.UNAVAILABLE
    retryable = True


@dataclass
class _Out:
    """A summary's model call out to a server of its own."""

    server: str
    task: asyncio.Task[Any]
    gave_way: bool = False


@dataclass
class Landed:
    """A summary that came back: its text and bounds, what it cost, how to store it."""

    summary: Summary
    usage: Mapping[str, int] = field(default_factory=dict)
    store: Callable[[Summary], Awaitable[bool]] | None = None


class SummaryWriter:
    """Background summary calls of every session of one server (or one test)."""

    def __init__(
        self, is_running: Callable[[str], bool], server_busy: Callable[[str], bool] | None = None
    ) -> None:
        """``is_running(session_id)``: a run of that session is in progress (it writes the state itself);
        ``server_busy(server)``: a run talks to that model server now (none given: never)."""
        self._is_running = is_running
        self._server_busy = server_busy or (lambda server: False)
        self._writing: dict[str, asyncio.Task[None]] = {}
        self._landed: dict[str, Landed] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}
        self._calling: dict[str, _Out] = {}  # session -> its summary's model call out to a server of its own
        self._closed = False
        self._run_ended = asyncio.Event()  # replaced each time a run ends (wakes every waiter)

    def writing(self, session_id: str) -> bool:
        """A summary of this session is being written now."""
        task = self._writing.get(session_id)
        return task is not None and not task.done()

    def landed(self, session_id: str) -> Landed | None:
        """The latest summary that came back and may not be in the session's stored state yet."""
        return self._landed.get(session_id)

    def start(
        self,
        session_id: str,
        write: Callable[[CallOut], Awaitable[Written | None]],
        store: Callable[[Summary], Awaitable[bool]] | None = None,
        *,
        server: str | None = None,
    ) -> bool:
        """Write a summary in the background; False (nothing started) while another is being written.

        ``write(call_out)`` returns the summary and its usage, or None when it failed (it logs
        why); it makes its model call through ``call_out``. ``store`` persists a landed summary
        (True: stored or already there; False: keep it for the next run to take). ``server``:
        a model server of its own, which ``call_out`` calls only once no run talks to it.
        """
        if self._closed:  # the server is stopping: the turns cut now wait for the next cut after a restart
            return False
        if self.writing(session_id):
            log.info("A summary of this conversation is still being written; the turns cut now wait for the next cut")
            return False
        task = self._track(session_id, self._write(session_id, write, store, server))
        self._writing[session_id] = task
        return True

    async def _write(
        self,
        session_id: str,
        write: Callable[[CallOut], Awaitable[Written | None]],
        store: Callable[[Summary], Awaitable[bool]] | None,
        server: str | None,
    ) -> None:
        async def call_out(call: Callable[[], Awaitable[T]]) -> T:
            return await self._call_out(session_id, server, call)

        result = await write(call_out)
        if result is None:
            return
        summary, usage = result
        previous = self._landed.get(session_id)
        if previous is None or _until(summary) >= _until(previous.summary):
            self._landed[session_id] = Landed(summary, usage, store)
        await self.settle(session_id)

    async def _call_out(self, session_id: str, server: str | None, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, for a server of its own only while no run talks to it (see :meth:`make_way`)."""
        if server is None:
            return await call()
        for _ in range(MAX_GIVE_WAYS + 1):
            while self._server_busy(server):  # not beside anyone's model calls there
                await self._run_ended.wait()
            out = self._calling[session_id] = _Out(server, asyncio.ensure_future(call()))
            try:
                return await out.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not out.gave_way or (current is not None and current.cancelling()):
                    raise  # this writer is being cancelled (a deleted session, the server stopping)
            finally:
                if self._calling.get(session_id) is out:
                    del self._calling[session_id]
        raise SummaryGaveWayError(f"its model call gave way to a question {MAX_GIVE_WAYS + 1} times")

    def _track(self, session_id: str, work: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        tasks = self._tasks.setdefault(session_id, set())
        tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            tasks.discard(finished)
            if not tasks:
                self._tasks.pop(session_id, None)
            if self._writing.get(session_id) is finished:
                del self._writing[session_id]
            if not finished.cancelled() and finished.exception() is not None:
                log.error("Writing the conversation summary failed", exc_info=finished.exception())

        task.add_done_callback(done)
        return task

    async def wait(self, session_id: str) -> None:
        """Return once the session's background work (writing, storing) is over."""
        while self._tasks.get(session_id):
            await asyncio.gather(*self._tasks[session_id], return_exceptions=True)

    def lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    async def idle(self, session_id: str) -> None:
        """Return once no summary of this session is being stored (a run calls this before it reads the state)."""
        lock = self._locks.get(session_id)  # none made for sessions that never had a summary
        if lock is not None:
            async with lock:
                pass

    async def settle(self, session_id: str) -> None:
        """Store the landed summary if no run of the session is in progress (else the run takes it)."""
        async with self.lock(session_id):
            landed = self._landed.get(session_id)
            if landed is None or landed.store is None or self._is_running(session_id):
                return
            try:
                stored = await landed.store(landed.summary)
            except Exception:  # the summary stays in memory; the next run takes it
                log.exception("Could not store the conversation summary")
                return
            if stored and self._landed.get(session_id) is landed:
                del self._landed[session_id]

    def make_way(self, server: str) -> int:
        """A run starts talking to ``server``: the summaries' model calls out to it give way (how many did).

        A server of one slot would make the run's question wait behind them. Each is
        cancelled and sent again once no run talks to the server (the summary keeps
        its writer: no second one starts meanwhile).
        """
        gave_way = 0
        for session_id, out in self._calling.items():
            if out.server != server or out.gave_way or out.task.done():
                continue
            out.gave_way = True
            out.task.cancel()
            gave_way += 1
            log.info("Summary call of session %s gives way: a question to the same model server goes first; "
                     "it is sent again once the server is free", session_id)
        return gave_way

    def after_run(self, session_id: str) -> None:
        """A run of the session ended: summaries waiting for its server look again; what landed is stored."""
        ended, self._run_ended = self._run_ended, asyncio.Event()
        ended.set()
        if session_id in self._landed and not self._closed:
            self._track(session_id, self.settle(session_id))

    async def cancel(self, session_id: str) -> None:
        """Stop everything of this session (it is being deleted): nothing is stored for it afterwards."""
        self._landed.pop(session_id, None)
        tasks = list(self._tasks.get(session_id, ()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._landed.pop(session_id, None)
        self._locks.pop(session_id, None)

    async def close(self) -> None:
        """The server stops (runs already ended): store what landed, cancel the calls still out.

        Nothing starts afterwards (a run that slipped in late neither starts nor stores a summary).
        """
        self._closed = True
        for session_id in list(self._landed):
            await self.settle(session_id)
        tasks = [task for tasks in self._tasks.values() for task in tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _until(summary: Mapping[str, Any]) -> int:
    until = summary.get("until")
    return until if isinstance(until, int) else 0
