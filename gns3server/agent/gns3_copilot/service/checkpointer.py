"""A checkpointer whose work happens off the event loop.

LangGraph stores the whole message list in every checkpoint. For a conversation
of 2,000 messages that is ~3.5 MB to serialise on each graph step (~16 ms) and to
deserialise on each read (~40 ms) — CPU work that LangGraph's async SQLite saver
does on the event loop, stalling every other request of the GNS3 server. This
wrapper runs a synchronous saver's methods elsewhere, so the loop only waits: on
the thread of the saver's :class:`..db.Database` (a ``SqliteSaver`` over that
database's connection, which never leaves that thread), or, without one, in
worker threads (the wrapped saver must then be thread-safe).

It also keeps keys out of storage: LangGraph stores a failed node's exception in
the checkpoint's pending writes (channel ``__error__``, as its ``repr``), and a
provider's exception may quote the API key. Those writes are stored as the
exception's ``repr`` scrubbed (:func:`..redaction.scrub`), which is what the
serializer would have stored, minus the secrets.
"""

from __future__ import annotations

import asyncio
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
    """Async checkpointer API over a synchronous saver, run on ``database``'s thread (or worker threads)."""

    def __init__(self, saver: BaseCheckpointSaver[Any], database: Database | None = None) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver
        self.database = database

    def _blocking(self, work: Callable[[], T]) -> T:
        return work() if self.database is None else self.database.call_blocking(lambda _connection: work())

    async def _off_loop(self, work: Callable[[], T]) -> T:
        if self.database is None:
            return await asyncio.to_thread(work)
        return await self.database.call(lambda _connection: work())

    # The synchronous API is the wrapped saver's own (on the database's thread, if any).
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._blocking(lambda: self.saver.get_tuple(config))

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
        return iter(self._blocking(lambda: list(self.saver.list(config, filter=filter, before=before, limit=limit))))

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return self._blocking(lambda: self.saver.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._blocking(lambda: self.saver.put_writes(config, scrub_writes(writes), task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._blocking(lambda: self.saver.delete_thread(thread_id))

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> ThreadedCheckpointer:
        derived = self.saver.with_allowlist(extra_allowlist)
        return self if derived is self.saver else ThreadedCheckpointer(derived, self.database)

    # The asynchronous API runs it off the event loop.
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._off_loop(lambda: self.saver.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await self._off_loop(lambda: list(self.saver.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return await self._off_loop(lambda: self.saver.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._off_loop(lambda: self.saver.put_writes(config, scrub_writes(writes), task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._off_loop(lambda: self.saver.delete_thread(thread_id))
