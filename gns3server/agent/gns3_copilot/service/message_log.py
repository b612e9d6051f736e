"""A conversation's messages stored a row each, beside LangGraph's checkpoint of it.

LangGraph's SQLite saver stores a checkpoint as one blob of every channel's value, the
whole message list included: at 500 turns a run wrote ~700 KB (serialised on the
database's thread, then through the WAL) and every read of the state deserialised some
1,250 messages, twice per turn. Here a checkpoint's ``messages`` value is a small
reference, ``{"copilot_messages": n}``, and the messages are rows of ``copilot_messages``
(thread, position, serialised message): a write serialises only the messages that are
new or replaced since the list last read or written for that thread, which is kept in
memory (the very objects the graph holds, so it compares them by identity), and a read
of the thread's latest state is that list again, without deserialising anything, with
the index of its ids (``agent/state_messages.py``) that lets the run's updates append
without walking it.

A checkpoint written before (its ``messages`` a list) reads as it always did, and is
rewritten in the new form by the conversation's next run. Every method runs on the
conversations database's thread (:class:`.checkpointer.ThreadedCheckpointer` calls
them there), so the memory needs no lock.
"""

from __future__ import annotations

import contextlib
import operator
import sqlite3
from collections import OrderedDict
from collections.abc import Mapping
from itertools import compress
from typing import Any

from langgraph.checkpoint.base import Checkpoint, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..agent.state_messages import indexed_copy, kept_copy, successor_copy
from ..db import SchemaError
from .message_rows import message_from_row

MESSAGES_CHANNEL = "messages"
REFERENCE = "copilot_messages"
"""The key of the reference that stands for the message list in a stored checkpoint."""
KEPT_MESSAGES = 40_000
"""Messages kept in memory over all threads (about 30 conversations of 500 turns)."""

MESSAGES_TABLE = """CREATE TABLE IF NOT EXISTS copilot_messages (
    thread_id TEXT NOT NULL,
    position  INTEGER NOT NULL,
    type      TEXT NOT NULL,
    message   BLOB NOT NULL,
    PRIMARY KEY (thread_id, position)
)"""
"""The rows, created by the conversations' schema (``session_store.SESSIONS_SCHEMA``, version 3): a
release that knows only an earlier version reads checkpoints whole, so it refuses the file rather than read
a reference as the message list."""


class StoredMessagesError(SchemaError):
    """A checkpoint names more messages than its conversation has rows (a damaged file); a client
    is told only that the copilot cannot use its database."""

    code = "stored_messages_missing"


class MessageLog:
    """The ``copilot_messages`` rows of every thread, and the lists last read or written."""

    def __init__(self, serde: SerializerProtocol, kept_messages: int = KEPT_MESSAGES) -> None:
        self.serde = serde
        self._kept: OrderedDict[str, list[Any]] = OrderedDict()
        self._kept_messages = kept_messages
        self._kept_total = 0

    def write(self, connection: sqlite3.Connection, thread_id: str, checkpoint: Checkpoint) -> tuple[Checkpoint, list[Any] | None]:
        """Store the new or replaced messages of ``checkpoint`` (uncommitted: the saver's put commits
        them with the checkpoint); returns the checkpoint to store and the list to :meth:`keep` once it is."""
        values = checkpoint.get("channel_values") or {}
        messages = values.get(MESSAGES_CHANNEL)
        if not isinstance(messages, list):
            return checkpoint, None
        before = self._kept.get(thread_id)
        # The positions whose message is not the object stored there (C-level iterators: the
        # unchanged history costs no Python step per message).
        kept = 0 if before is None else min(len(before), len(messages))
        changed = [*compress(range(kept), map(operator.is_not, before or (), messages)), *range(kept, len(messages))]
        rows = []
        for position in changed:
            type_, blob = self.serde.dumps_typed(messages[position])
            rows.append((thread_id, position, type_, blob))
        connection.executemany("INSERT OR REPLACE INTO copilot_messages VALUES (?, ?, ?, ?)", rows)
        if before is None or len(before) > len(messages):
            connection.execute("DELETE FROM copilot_messages WHERE thread_id = ? AND position >= ?",
                               (thread_id, len(messages)))
        stored: Checkpoint = {**checkpoint, "channel_values": {**values, MESSAGES_CHANNEL: {REFERENCE: len(messages)}}}
        # Kept with its ids' index, made from the last kept list's and what changed: no message read again.
        return stored, successor_copy(before, messages, changed)

    def read(self, connection: sqlite3.Connection, found: CheckpointTuple | None) -> CheckpointTuple | None:
        """``found`` with its message list in place of the reference (as it is when it has none)."""
        if found is None:
            return None
        values = found.checkpoint.get("channel_values") or {}
        reference = values.get(MESSAGES_CHANNEL)
        if not (isinstance(reference, Mapping) and isinstance(reference.get(REFERENCE), int)):
            return found
        count = reference[REFERENCE]
        thread_id = str(found.config["configurable"]["thread_id"])
        messages = self._kept.get(thread_id)
        if messages is None or len(messages) != count:
            # Decoded as they come: each row's bytes freed before the next (their memory reused, not new
            # pages). Closed here whatever happens: a cursor left open by a row that cannot be decoded
            # would keep its statement active, and be freed by whichever thread drops the error.
            with contextlib.closing(connection.execute(
                "SELECT type, message FROM copilot_messages WHERE thread_id = ? AND position < ? ORDER BY position",
                (thread_id, count),
            )) as rows:
                read = [message_from_row(self.serde, type_, blob) for type_, blob in rows]
            if len(read) != count:
                raise StoredMessagesError(
                    f"The stored state of conversation {thread_id} names {count} messages, {len(read)} are stored"
                )
            messages = indexed_copy(read)
            self.keep(thread_id, messages)
        else:
            self._kept.move_to_end(thread_id)
        # With its ids' index: the run's first update of it appends without walking it.
        checkpoint: Checkpoint = {**found.checkpoint, "channel_values": {**values, MESSAGES_CHANNEL: kept_copy(messages)}}
        return found._replace(checkpoint=checkpoint)

    def keep(self, thread_id: str, messages: list[Any]) -> None:
        """Remember ``messages`` as what the thread's rows hold (the latest first to stay)."""
        self.forget(thread_id)
        self._kept[thread_id] = messages
        self._kept_total += len(messages)
        while self._kept_total > self._kept_messages and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._kept_total -= len(dropped)

    def forget(self, thread_id: str) -> None:
        dropped = self._kept.pop(thread_id, None)
        if dropped is not None:
            self._kept_total -= len(dropped)

    def count(self, thread_id: str) -> int | None:
        """How many messages the thread's latest state holds, if that list is in memory."""
        kept = self._kept.get(thread_id)
        return None if kept is None else len(kept)

    def latest(self, thread_id: str) -> list[Any] | None:
        """The thread's latest message list (a copy), if it is in memory."""
        kept = self._kept.get(thread_id)
        return None if kept is None else list(kept)

    def delete(self, connection: sqlite3.Connection, thread_id: str) -> None:
        """Delete the thread's rows (uncommitted: with the saver's delete of its checkpoints)."""
        self.forget(thread_id)
        connection.execute("DELETE FROM copilot_messages WHERE thread_id = ?", (thread_id,))
