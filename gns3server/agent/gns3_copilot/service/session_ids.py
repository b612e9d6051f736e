"""A session id is one value, however a client spells it.

Session ids are UUIDs: the server's own (``uuid4``) or one a client chose for a
new chat (GNS3 3.1's web UI does). A UUID has many spellings (``ABC...``,
``{abc...}``, ``urn:uuid:abc...``, without hyphens), and before ids were
normalised each spelling named a different session: the upper-case spelling of
an existing session's id made a second one. :func:`canonical_session_id` gives
the one spelling (lower case, hyphenated, as ``str(uuid.UUID(...))`` writes it);
the API applies it to every session id it is given (path, body, query), so the
store only ever sees that spelling.

:func:`canonicalise_stored_ids` is the sessions component's migration that
brings ids stored before that to it, in every table of the conversations'
database that names a session (LangGraph's threads included). A stored id
whose canonical spelling is already taken (the duplicate the old behaviour
made) keeps its conversation under a fresh id, rather than being merged or lost.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid

log = logging.getLogger(__name__)

__all__ = ["canonical_session_id", "canonicalise_stored_ids"]

# Tables of the conversations' database that name a session, and the column that does.
_SESSION_COLUMNS = (
    ("copilot_sessions", "session_id"),
    ("copilot_inflight", "session_id"),
    ("copilot_faults", "session_id"),
    ("checkpoints", "thread_id"),
    ("writes", "thread_id"),
)


def canonical_session_id(text: str) -> str:
    """The one spelling of a session id: a UUID in any spelling as ``str(uuid.UUID(text))``;
    anything else (which names no session) as it is."""
    try:
        return str(uuid.UUID(text))
    except (ValueError, TypeError, AttributeError):
        return text


def canonicalise_stored_ids(db: sqlite3.Connection) -> None:
    """Rename stored session ids to their canonical spelling (inside the migration's transaction)."""
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = [(table, column) for table, column in _SESSION_COLUMNS if table in present]
    stored = [row[0] for row in db.execute("SELECT session_id FROM copilot_sessions")]
    taken = set(stored)
    if "checkpoints" in present:  # a conversation whose session row is gone still holds its id
        taken |= {row[0] for row in db.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    for old in stored:
        new = canonical_session_id(old)
        if new == old:
            continue
        if new in taken:  # a second session made by another spelling: it stays a session of its own
            new = str(uuid.uuid4())
            log.warning("Session %s duplicated session %s (another spelling of its id): it is now %s",
                        old, canonical_session_id(old), new)
        for table, column in tables:
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new, old))
        taken.discard(old)
        taken.add(new)
