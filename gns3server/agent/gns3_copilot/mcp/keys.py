"""MCP API keys: long-lived per-user credentials for MCP clients, stored hashed.

A key is ``gns3c_mcp_`` followed by 256 random bits; only its SHA-256 digest is
stored (a salted slow hash buys nothing for a random secret of that size, and a
lookup must stay one indexed query), so the key itself is shown once, when it is
created, and never again. A key belongs to one GNS3 user, has a name (which the
console audit shows), a scope (``read_only``: the read-only tools only; ``full``)
and an optional expiry. Revoking keeps the row (its name stays meaningful in the
audit) and refuses the key at once.

A name is unique among its user's keys, revoked ones included, so that the
audit's ``mcp:key:<name>`` names one key for good: a revoked key's entries are
never attributed to a newer key of the same name. Keys stored before names were
unique are renamed once (``laptop (2)``, oldest keeps its name) by migration 2.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..db import Database, Migration, Schema
from ..errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

DATABASE_NAME = "copilot_mcp_keys.sqlite3"
KEY_PREFIX = "gns3c_mcp_"
SHOWN_PREFIX_CHARS = len(KEY_PREFIX) + 6
Scope = Literal["read_only", "full"]
SCOPES: tuple[Scope, ...] = ("read_only", "full")


def _unique_names(db: sqlite3.Connection) -> None:
    """Give the later of two keys of a user that share a name a name of its own, then keep names unique."""
    taken: set[tuple[str, str]] = set()
    rows = db.execute("SELECT key_id, user_id, name FROM copilot_mcp_keys ORDER BY created_at, key_id").fetchall()
    for key_id, user_id, name in rows:
        unique, number = name, 1
        while (user_id, unique) in taken:
            number += 1
            unique = f"{name} ({number})"
        if unique != name:
            db.execute("UPDATE copilot_mcp_keys SET name = ? WHERE key_id = ?", (unique, key_id))
            log.warning("MCP key %s of user %s shared its name %r with an older key: renamed %r",
                        key_id, user_id, name, unique)
        taken.add((user_id, unique))
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS copilot_mcp_keys_name ON copilot_mcp_keys (user_id, name)")


MCP_KEYS_SCHEMA = Schema("mcp_keys", (
    Migration(1, (
        """CREATE TABLE IF NOT EXISTS copilot_mcp_keys (
            key_id      TEXT PRIMARY KEY,
            user_id     TEXT NOT NULL,
            name        TEXT NOT NULL,
            scope       TEXT NOT NULL,
            digest      TEXT NOT NULL UNIQUE,
            prefix      TEXT NOT NULL,
            created_at  REAL NOT NULL,
            expires_at  REAL,
            revoked_at  REAL,
            last_used_at REAL
        )""",
        "CREATE INDEX IF NOT EXISTS copilot_mcp_keys_owner ON copilot_mcp_keys (user_id, created_at)",
    ), "MCP keys"),
    Migration(2, _unique_names, "key names unique per user"),
))
_COLUMNS = "key_id, user_id, name, scope, prefix, created_at, expires_at, revoked_at, last_used_at"


class MCPKeyNotFoundError(CopilotError):
    """No such key of this user (other users' keys look the same)."""

    kind = ErrorKind.NOT_FOUND
    code = "mcp_key_not_found"


class MCPKeyNameTakenError(CopilotError):
    """The user already has a key of that name (revoked keys keep theirs, for the audit)."""

    kind = ErrorKind.CONFLICT
    code = "mcp_key_name_taken"


def looks_like_key(token: str) -> bool:
    """Whether a bearer token is one of our MCP keys rather than a GNS3 JWT."""
    return token.startswith(KEY_PREFIX)


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class MCPKey:
    """A stored key, without any secret (the digest is not read back either)."""

    key_id: str
    user_id: str
    name: str
    scope: Scope
    prefix: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> MCPKey:
        return cls(*row)

    def usable(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    @property
    def read_only(self) -> bool:
        return self.scope == "read_only"


class MCPKeyStore:
    """Every user's MCP keys, in a SQLite file of their own (its schema: :data:`MCP_KEYS_SCHEMA`)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    @classmethod
    async def open(cls, data_dir: Path) -> MCPKeyStore:
        return cls(await Database.open(Path(data_dir) / DATABASE_NAME, (MCP_KEYS_SCHEMA,), name="mcp-keys"))

    async def close(self) -> None:
        await self._database.close()

    async def _row(self, query: str, args: tuple[Any, ...]) -> MCPKey | None:
        row = await self._database.fetchone(query, args)
        return MCPKey.from_row(row) if row else None

    async def create(
        self, user_id: str, name: str, scope: Scope, expires_at: float | None = None
    ) -> tuple[MCPKey, str]:
        """A new key of ``user_id``: the record and the key itself (to show once)."""
        if scope not in SCOPES:
            raise ValueError(f"scope: must be one of {', '.join(SCOPES)}")
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = str(uuid.uuid4())
        row = (key_id, user_id, name, scope, digest_of(secret), secret[:SHOWN_PREFIX_CHARS], time.time(), expires_at)
        try:
            await self._database.execute(
                "INSERT INTO copilot_mcp_keys (key_id, user_id, name, scope, digest, prefix, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        except sqlite3.IntegrityError as exc:  # the unique index on (user_id, name): two requests cannot race past it
            if "copilot_mcp_keys.name" not in str(exc):
                raise
            raise MCPKeyNameTakenError(
                "You already have an MCP key of that name (revoked keys keep theirs, so that the audit names one "
                "key): choose another name"
            ) from exc
        return await self.get(user_id, key_id), secret

    async def list(self, user_id: str) -> list[MCPKey]:
        query = f"SELECT {_COLUMNS} FROM copilot_mcp_keys WHERE user_id = ? ORDER BY created_at"
        return [MCPKey.from_row(row) for row in await self._database.fetchall(query, (user_id,))]

    async def get(self, user_id: str, key_id: str) -> MCPKey:
        record = await self._row(
            f"SELECT {_COLUMNS} FROM copilot_mcp_keys WHERE key_id = ? AND user_id = ?", (key_id, user_id)
        )
        if record is None:
            raise MCPKeyNotFoundError(f"MCP key {key_id} not found")
        return record

    async def revoke(self, user_id: str, key_id: str) -> MCPKey:
        """Refuse the key from now on (idempotent); the record stays for the audit's sake."""
        await self.get(user_id, key_id)
        await self._database.execute(
            "UPDATE copilot_mcp_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE key_id = ? AND user_id = ?",
            (time.time(), key_id, user_id),
        )
        return await self.get(user_id, key_id)

    async def verify(self, key: str) -> MCPKey | None:
        """The key's record if it is known, not revoked and not expired; its use is noted."""
        now = time.time()
        record = await self._row(f"SELECT {_COLUMNS} FROM copilot_mcp_keys WHERE digest = ?", (digest_of(key),))
        if record is None or not record.usable(now):
            return None
        await self._database.execute("UPDATE copilot_mcp_keys SET last_used_at = ? WHERE key_id = ?", (now, record.key_id))
        return record

    async def still_usable(self, key_id: str) -> bool:
        """Whether a key (seen valid earlier) is still neither revoked nor expired."""
        record = await self._row(f"SELECT {_COLUMNS} FROM copilot_mcp_keys WHERE key_id = ?", (key_id,))
        return record is not None and record.usable(time.time())
