"""A checkpointer whose work happens off the event loop.

LangGraph stores the whole message list in every checkpoint. For a conversation
of 2,000 messages that is ~3.5 MB to serialise on each graph step (~16 ms) and to
deserialise on each read (~40 ms) — CPU work that LangGraph's async SQLite saver
does on the event loop, stalling every other request of the GNS3 server. This
wrapper runs a synchronous saver's methods elsewhere, so the loop only waits: on
the thread of the saver's :class:`..db.Database` (a ``SqliteSaver`` over that
database's connection, which never leaves that thread), or, without one, in
worker threads (the wrapped saver must then be thread-safe).

With a :class:`.message_log.MessageLog`, a checkpoint's message list is stored a row
per message beside it, written when new and read back from memory (see there).

It also keeps keys out of storage: LangGraph stores a failed node's exception in
the checkpoint's pending writes (channel ``__error__``, as its ``repr``), and a
provider's exception may quote the API key. Those writes are stored as the
exception's ``repr`` scrubbed (:func:`..redaction.scrub`), which is what the
serializer would have stored, minus the secrets.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from ..db import Database
from ..redaction import scrub
from .message_log import MessageLog

T = TypeVar("T")
ERROR_CHANNEL = "__error__"
"""The channel of LangGraph's stored node errors (no public constant)."""


def scrub_writes(writes: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``writes`` with each stored exception replaced by its scrubbed ``repr``."""
    return [
        (channel, scrub(repr(value)) if channel == ERROR_CHANNEL and isinstance(value, BaseException) else value)
        for channel, value in writes
    ]


class ThreadedCheckpointer(BaseCheckpointSaver[Any]):
    """Async checkpointer API over a synchronous saver, run on ``database``'s thread (or worker threads).

    ``log`` (with a ``database`` only: the saver must work on that database's connection)
    stores the message list of each thread's checkpoints a row per message.
    """

    def __init__(
        self, saver: BaseCheckpointSaver[Any], database: Database | None = None, log: MessageLog | None = None
    ) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver
        self.database = database
        self.log = log if database is not None else None

    def _blocking(self, work: Callable[[sqlite3.Connection | None], T]) -> T:
        return work(None) if self.database is None else self.database.call_blocking(work)

    async def _off_loop(self, work: Callable[[sqlite3.Connection | None], T]) -> T:
        if self.database is None:
            return await asyncio.to_thread(work, None)
        return await self.database.call(work)

    def _log_for(self, connection: sqlite3.Connection | None, config: RunnableConfig) -> MessageLog | None:
        """The message log, for the main namespace of a thread on the database's connection."""
        configurable = config.get("configurable") or {}
        return self.log if connection is not None and not configurable.get("checkpoint_ns") else None

    def _get(self, connection: sqlite3.Connection | None, config: RunnableConfig) -> CheckpointTuple | None:
        found = self.saver.get_tuple(config)
        log = self._log_for(connection, config)
        return found if log is None or connection is None else log.read(connection, found)

    def _list(
        self, connection: sqlite3.Connection | None, config: RunnableConfig | None, **options: Any
    ) -> list[CheckpointTuple]:
        found = list(self.saver.list(config, **options))
        if self.log is None or connection is None:
            return found
        log = self.log
        return [item if item.config["configurable"].get("checkpoint_ns") else log.read(connection, item) or item
                for item in found]

    def _put(
        self, connection: sqlite3.Connection | None, config: RunnableConfig, checkpoint: Checkpoint,
        metadata: CheckpointMetadata, new_versions: ChannelVersions,
    ) -> RunnableConfig:
        log = self._log_for(connection, config)
        if log is None or connection is None:
            return self.saver.put(config, checkpoint, metadata, new_versions)
        thread_id = str(config["configurable"]["thread_id"])
        try:
            stored, messages = log.write(connection, thread_id, checkpoint)
            saved = self.saver.put(config, stored, metadata, new_versions)  # commits the rows with it
        except BaseException:  # no row of a checkpoint that was not stored is left for a later commit
            connection.rollback()
            log.forget(thread_id)
            raise
        if messages is not None:
            log.keep(thread_id, messages)
        return saved

    def _delete(self, connection: sqlite3.Connection | None, thread_id: str) -> None:
        if self.log is not None and connection is not None:
            self.log.delete(connection, thread_id)
        self.saver.delete_thread(thread_id)  # commits the rows' deletion with its own

    def _count(self, connection: sqlite3.Connection | None, thread_id: str) -> int | None:
        return None if self.log is None else self.log.count(thread_id)

    def _latest(self, connection: sqlite3.Connection | None, thread_id: str) -> Sequence[Any] | None:
        return None if self.log is None else self.log.latest(thread_id)

    # The synchronous API is the wrapped saver's own (on the database's thread, if any).
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._blocking(lambda connection: self._get(connection, config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if self.database is None:
            return self.saver.list(config, filter=filter, before=before, limit=limit)
        return iter(self._blocking(lambda connection: self._list(connection, config, filter=filter, before=before,
                                                                 limit=limit)))

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return self._blocking(lambda connection: self._put(connection, config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._blocking(lambda _connection: self.saver.put_writes(config, scrub_writes(writes), task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._blocking(lambda connection: self._delete(connection, thread_id))

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> ThreadedCheckpointer:
        derived = self.saver.with_allowlist(extra_allowlist)
        return self if derived is self.saver else ThreadedCheckpointer(derived, self.database, self.log)

    # The asynchronous API runs it off the event loop.
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._off_loop(lambda connection: self._get(connection, config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await self._off_loop(lambda connection: self._list(connection, config, filter=filter, before=before,
                                                                   limit=limit))
        for item in items:
            yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return await self._off_loop(lambda connection: self._put(connection, config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._off_loop(lambda _connection: self.saver.put_writes(config, scrub_writes(writes), task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._off_loop(lambda connection: self._delete(connection, thread_id))

    def message_count_here(self, thread_id: str) -> int | None:
        """:meth:`message_count`, called on the database's thread (inside another job there)."""
        return self._count(None, thread_id)

    async def message_count(self, thread_id: str) -> int | None:
        """How many messages the thread's latest checkpoint holds, when known without reading it."""
        return await self._off_loop(lambda connection: self._count(connection, thread_id))

    async def latest_messages(self, thread_id: str) -> Sequence[Any] | None:
        """The thread's latest checkpoint's messages, when known without reading it."""
        return await self._off_loop(lambda connection: self._latest(connection, thread_id))
