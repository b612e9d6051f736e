"""Per-user LLM configs, with their API keys encrypted at rest.

A config is stored as validated JSON *without* its key; the key, when there is
one, is a separate Fernet token (:mod:`.crypto`). :meth:`LLMConfigStore.usable`
is the only place a key is decrypted: to hand the full config to a run, or to
mask it for display. Each user has at most one default config; the server-wide
default (from ``[Copilot]``) applies when a user has none.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from ..agent.model_factory import URL_CREDENTIALS, validate_llm_config
from .crypto import SecretBox
from .errors import LLMConfigNotFoundError

log = logging.getLogger(__name__)

DATABASE_NAME = "llm_configs.sqlite3"
"""A file of its own in the data directory: rare, tiny writes that never wait on conversations."""
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS copilot_llm_configs (
    config_id   TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    config      TEXT NOT NULL,
    api_key     TEXT,
    is_default  INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS copilot_llm_configs_owner ON copilot_llm_configs (user_id, created_at);
"""
Approval = Callable[[Mapping[str, Any]], Awaitable[None]]
"""A last check of a validated config (without its key) before it is stored; raises to refuse."""

_COLUMNS = "config_id, user_id, config, api_key, is_default, created_at, updated_at"


@dataclass(frozen=True)
class LLMConfigRecord:
    """A stored config; ``config`` has no ``api_key``, ``encrypted_key`` is the Fernet token."""

    config_id: str
    user_id: str
    config: Mapping[str, Any]
    encrypted_key: str | None
    is_default: bool
    created_at: float
    updated_at: float

    @property
    def has_api_key(self) -> bool:
        return self.encrypted_key is not None

    def __repr__(self) -> str:  # never the encrypted key either
        return f"<LLMConfigRecord {self.config_id} user={self.user_id} default={self.is_default}>"

    @classmethod
    def from_row(cls, row: Iterable[Any]) -> LLMConfigRecord:
        config_id, user_id, config, api_key, is_default, created_at, updated_at = row
        return cls(config_id, user_id, json.loads(config), api_key, bool(is_default), created_at, updated_at)


def _split_key(config: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    plain = dict(config)
    return plain, plain.pop("api_key", None)


class LLMConfigStore:
    """LLM configs of every user, in a table of the copilot's SQLite database."""

    def __init__(self, connection: aiosqlite.Connection, box: SecretBox) -> None:
        self._db = connection
        self._box = box

    @classmethod
    async def open(cls, data_dir: Path, box: SecretBox) -> LLMConfigStore:
        # Autocommit: every statement is its own short transaction.
        connection = await aiosqlite.connect(str(data_dir / DATABASE_NAME), isolation_level=None)
        await connection.execute("PRAGMA journal_mode=WAL")
        await connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # A deleted or replaced config (its encrypted key, a URL) is overwritten, not left in free pages.
        await connection.execute("PRAGMA secure_delete=ON")
        await connection.executescript(_SCHEMA)
        store = cls(connection, box)
        await store._remove_url_credentials()
        return store

    async def _remove_url_credentials(self) -> None:
        """Configs saved before credentials in ``base_url`` were refused kept them in plain text:
        remove them from the stored URL (secure_delete overwrites the old row); the owner sets api_key."""
        async with self._db.execute("SELECT config_id, config FROM copilot_llm_configs") as cursor:
            rows = await cursor.fetchall()
        removed = False
        for config_id, text in rows:
            config = json.loads(text)
            url = config.get("base_url")
            if isinstance(url, str) and URL_CREDENTIALS.match(url):
                config["base_url"] = URL_CREDENTIALS.sub(r"\1", url)
                await self._db.execute(
                    "UPDATE copilot_llm_configs SET config = ? WHERE config_id = ?", (json.dumps(config), config_id)
                )
                log.warning("Removed credentials from the base_url of LLM config %s (use api_key)", config_id)
                removed = True
        if removed:  # the old rows' page images must not stay in the write-ahead log either
            await self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def close(self) -> None:
        await self._db.close()

    async def list(self, user_id: str) -> list[LLMConfigRecord]:
        async with self._db.execute(
            f"SELECT {_COLUMNS} FROM copilot_llm_configs WHERE user_id = ? ORDER BY created_at", (user_id,)
        ) as cursor:
            return [LLMConfigRecord.from_row(row) for row in await cursor.fetchall()]

    async def get(self, user_id: str, config_id: str) -> LLMConfigRecord:
        """The user's config, else LLMConfigNotFoundError (another user's included)."""
        async with self._db.execute(
            f"SELECT {_COLUMNS} FROM copilot_llm_configs WHERE config_id = ? AND user_id = ?", (config_id, user_id)
        ) as cursor:
            row = await cursor.fetchone()
        if row is None:
            raise LLMConfigNotFoundError(f"LLM config {config_id} not found")
        return LLMConfigRecord.from_row(row)

    async def default(self, user_id: str) -> LLMConfigRecord | None:
        async with self._db.execute(
            f"SELECT {_COLUMNS} FROM copilot_llm_configs WHERE user_id = ? AND is_default = 1", (user_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return LLMConfigRecord.from_row(row) if row else None

    async def create(
        self, user_id: str, config: Mapping[str, Any], *, make_default: bool, approve: Approval | None = None
    ) -> LLMConfigRecord:
        """Validate and store ``config``; the user's first config becomes their default.

        ``approve`` (awaited with the validated config before anything is stored) may refuse it.
        """
        plain, key = _split_key(validate_llm_config(config))
        if approve is not None:
            await approve(plain)
        now = time.time()
        config_id = str(uuid.uuid4())
        await self._db.execute(
            f"INSERT INTO copilot_llm_configs ({_COLUMNS}) VALUES (?, ?, ?, ?, 0, ?, ?)",
            (config_id, user_id, json.dumps(plain), self._box.encrypt(key) if key else None, now, now),
        )
        if make_default or await self.default(user_id) is None:
            await self.set_default(user_id, config_id)
        return await self.get(user_id, config_id)

    async def update(
        self, user_id: str, config_id: str, changes: Mapping[str, Any], *, approve: Approval | None = None
    ) -> LLMConfigRecord:
        """Merge ``changes`` (a field set to None is removed; ``api_key`` absent keeps the key), re-validate;
        ``approve`` as for :meth:`create`, with the merged config."""
        record = await self.get(user_id, config_id)
        merged = dict(record.config)
        for name, value in changes.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        if "api_key" not in changes and record.encrypted_key is not None:
            merged["api_key"] = "kept"  # stands in for the stored key during validation only
        plain, key = _split_key(validate_llm_config(merged))
        if approve is not None:
            await approve(plain)
        if "api_key" in changes:
            encrypted = self._box.encrypt(key) if key else None
        else:
            encrypted = record.encrypted_key
        await self._db.execute(
            "UPDATE copilot_llm_configs SET config = ?, api_key = ?, updated_at = ? WHERE config_id = ? AND user_id = ?",
            (json.dumps(plain), encrypted, time.time(), config_id, user_id),
        )
        return await self.get(user_id, config_id)

    async def delete(self, user_id: str, config_id: str) -> None:
        await self.get(user_id, config_id)
        await self._db.execute(
            "DELETE FROM copilot_llm_configs WHERE config_id = ? AND user_id = ?", (config_id, user_id)
        )

    async def set_default(self, user_id: str, config_id: str) -> LLMConfigRecord:
        await self.get(user_id, config_id)
        # One statement, so there is never a moment with two defaults (or none) for the user.
        await self._db.execute(
            "UPDATE copilot_llm_configs SET is_default = (config_id = ?) WHERE user_id = ?", (config_id, user_id)
        )
        return await self.get(user_id, config_id)

    async def clear_default(self, user_id: str) -> None:
        await self._db.execute("UPDATE copilot_llm_configs SET is_default = 0 WHERE user_id = ?", (user_id,))

    def usable(self, record: LLMConfigRecord) -> dict[str, Any]:
        """The full config for a run, the API key decrypted (StoredKeyUnreadableError if it cannot be)."""
        config = dict(record.config)
        if record.encrypted_key is not None:
            config["api_key"] = self._box.decrypt(record.encrypted_key)
        return config
