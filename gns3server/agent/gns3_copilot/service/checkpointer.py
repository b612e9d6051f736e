"""A checkpointer whose work happens in worker threads, not on the event loop.

LangGraph stores the whole message list in every checkpoint. For a conversation
of 2,000 messages that is ~3.5 MB to serialise on each graph step (~16 ms) and to
deserialise on each read (~40 ms) — CPU work that LangGraph's async SQLite saver
does on the event loop, stalling every other request of the GNS3 server. This
wrapper runs a synchronous saver's methods in worker threads instead, so the loop
only waits. The wrapped saver must be thread-safe (``SqliteSaver`` serialises its
connection with a lock).

It also keeps keys out of storage: LangGraph stores a failed node's exception in
the checkpoint's pending writes (channel ``__error__``, as its ``repr``), and a
provider's exception may quote the API key. Those writes are stored as the
exception's ``repr`` scrubbed (:func:`..redaction.scrub`), which is what the
serializer would have stored, minus the secrets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from ..redaction import scrub

ERROR_CHANNEL = "__error__"
"""The channel of LangGraph's stored node errors (no public constant)."""


def scrub_writes(writes: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``writes`` with each stored exception replaced by its scrubbed ``repr``."""
    return [
        (channel, scrub(repr(value)) if channel == ERROR_CHANNEL and isinstance(value, BaseException) else value)
        for channel, value in writes
    ]


class ThreadedCheckpointer(BaseCheckpointSaver[Any]):
    """Async checkpointer API over a synchronous saver, one worker thread per call."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver

    # The synchronous API is the wrapped saver's own.
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.saver.list(config, filter=filter, before=before, limit=limit)

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return self.saver.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self.saver.put_writes(config, scrub_writes(writes), task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> ThreadedCheckpointer:
        derived = self.saver.with_allowlist(extra_allowlist)
        return self if derived is self.saver else ThreadedCheckpointer(derived)

    # The asynchronous API runs it in worker threads.
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.saver.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(
            lambda: list(self.saver.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.saver.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.saver.put_writes, config, scrub_writes(writes), task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.saver.delete_thread, thread_id)
