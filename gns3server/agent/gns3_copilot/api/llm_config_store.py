"""Per-user LLM configs, with their API keys encrypted at rest.

A config is stored as validated JSON *without* its key; the key, when there is
one, is a separate Fernet token (:mod:`.crypto`). :meth:`LLMConfigStore.usable`
is the only place a key is decrypted: to hand the full config to a run, or to
mask it for display. Each user has at most one default config; the server-wide
default (from ``[Copilot]``) applies when a user has none.

Configs are valid UTF-8 (the schema refuses a lone surrogate). One stored by an
older version may hold one, which no answer could show: it is repaired when the
store opens (each lone surrogate becomes U+FFFD, a warning names the config), and
any such row read later is shown repaired, so a list always answers and the
config can be seen, fixed or deleted.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.model.config import URL_CREDENTIALS, validate_llm_config
from ..db import Database, Migration, Schema, checkpoint_wal
from ..utf8 import first_unencodable, repaired
from .crypto import SecretBox
from .errors import ConfigVersionConflictError, LLMConfigNotFoundError

log = logging.getLogger(__name__)

DATABASE_NAME = "llm_configs.sqlite3"
"""A file of its own in the data directory: rare, tiny writes that never wait on conversations."""

LLM_CONFIGS_SCHEMA = Schema("llm_configs", (
    Migration(1, (
        """CREATE TABLE IF NOT EXISTS copilot_llm_configs (
            config_id   TEXT PRIMARY KEY,
            user_id     TEXT NOT NULL,
            config      TEXT NOT NULL,
            api_key     TEXT,
            is_default  INTEGER NOT NULL DEFAULT 0,
            created_at  REAL NOT NULL,
            updated_at  REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS copilot_llm_configs_owner ON copilot_llm_configs (user_id, created_at)",
    ), "LLM configs"),
))
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
        return cls(config_id, user_id, _readable(config_id, json.loads(config)), api_key, bool(is_default),
                   created_at, updated_at)


def _readable(config_id: str, config: Any) -> Any:
    """A stored config that every answer can show: one an older version stored with a lone
    surrogate in it is shown repaired (U+FFFD), rather than making its owner's lists fail."""
    where = first_unencodable(config)
    if where is None:
        return config
    log.warning("LLM config %s holds text that is not valid UTF-8 (in %s): shown with U+FFFD", config_id, where)
    return repaired(config)


def _split_key(config: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    plain = dict(config)
    return plain, plain.pop("api_key", None)


class LLMConfigStore:
    """LLM configs of every user, in a SQLite file of their own (its schema: :data:`LLM_CONFIGS_SCHEMA`)."""

    def __init__(self, database: Database, box: SecretBox) -> None:
        self._database = database
        self._box = box

    @classmethod
    async def open(cls, data_dir: Path, box: SecretBox) -> LLMConfigStore:
        database = await Database.open(Path(data_dir) / DATABASE_NAME, (LLM_CONFIGS_SCHEMA,), name="llm-configs")
        try:
            if await database.run(_repair_stored_rows):
                # The old rows' page images must not stay in the write-ahead log either.
                await database.call(checkpoint_wal)
        except BaseException:
            await database.close()
            raise
        return cls(database, box)

    async def close(self) -> None:
        await self._database.close()

    async def _one(self, query: str, args: tuple[Any, ...]) -> LLMConfigRecord | None:
        row = await self._database.fetchone(query, args)
        return LLMConfigRecord.from_row(row) if row else None

    async def _write(self, query: str, args: tuple[Any, ...]) -> None:
        await self._database.execute(query, args)

    async def list(self, user_id: str) -> list[LLMConfigRecord]:
        query = f"SELECT {_COLUMNS} FROM copilot_llm_configs WHERE user_id = ? ORDER BY created_at"
        return [LLMConfigRecord.from_row(row) for row in await self._database.fetchall(query, (user_id,))]

    async def get(self, user_id: str, config_id: str) -> LLMConfigRecord:
        """The user's config, else LLMConfigNotFoundError (another user's included)."""
        record = await self._one(
            f"SELECT {_COLUMNS} FROM copilot_llm_configs WHERE config_id = ? AND user_id = ?", (config_id, user_id)
        )
        if record is None:
            raise LLMConfigNotFoundError(f"LLM config {config_id} not found")
        return record

    async def default(self, user_id: str) -> LLMConfigRecord | None:
        return await self._one(
            f"SELECT {_COLUMNS} FROM copilot_llm_configs WHERE user_id = ? AND is_default = 1", (user_id,)
        )

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
        await self._write(
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
        # Only over the version merged from: an update that landed meanwhile (the approval above
        # may wait on DNS) is not overwritten unseen.
        updated = await self._database.execute(
            "UPDATE copilot_llm_configs SET config = ?, api_key = ?, updated_at = ?"
            " WHERE config_id = ? AND user_id = ? AND updated_at = ?",
            (json.dumps(plain), encrypted, time.time(), config_id, user_id, record.updated_at),
        )
        if updated == 0:
            raise ConfigVersionConflictError(
                f"LLM configuration {config_id} was changed by another request meanwhile; read it again"
            )
        return await self.get(user_id, config_id)

    async def delete(self, user_id: str, config_id: str) -> None:
        await self.get(user_id, config_id)
        await self._write(
            "DELETE FROM copilot_llm_configs WHERE config_id = ? AND user_id = ?", (config_id, user_id)
        )

    async def set_default(self, user_id: str, config_id: str) -> LLMConfigRecord:
        await self.get(user_id, config_id)
        # One statement, so there is never a moment with two defaults (or none) for the user.
        await self._write(
            "UPDATE copilot_llm_configs SET is_default = (config_id = ?) WHERE user_id = ?", (config_id, user_id)
        )
        return await self.get(user_id, config_id)

    async def clear_default(self, user_id: str) -> None:
        await self._write("UPDATE copilot_llm_configs SET is_default = 0 WHERE user_id = ?", (user_id,))

    def usable(self, record: LLMConfigRecord) -> dict[str, Any]:
        """The full config for a run, the API key decrypted (StoredKeyUnreadableError if it cannot be)."""
        config = dict(record.config)
        if record.encrypted_key is not None:
            config["api_key"] = self._box.decrypt(record.encrypted_key)
        return config


def _repair_stored_rows(db: sqlite3.Connection) -> bool:
    """What earlier versions stored and this one refuses, made safe at start-up; True if any row changed.

    Configs saved before credentials in ``base_url`` were refused kept them in plain text:
    they are removed from the stored URL (secure_delete overwrites the old row); the owner sets
    api_key. Configs saved before lone surrogates were refused get U+FFFD in their place.
    """
    changed = False
    for config_id, text in db.execute("SELECT config_id, config FROM copilot_llm_configs").fetchall():
        config = json.loads(text)
        fixed = False
        url = config.get("base_url")
        if isinstance(url, str) and URL_CREDENTIALS.match(url):
            config["base_url"] = URL_CREDENTIALS.sub(r"\1", url)
            log.warning("Removed credentials from the base_url of LLM config %s (use api_key)", config_id)
            fixed = True
        where = first_unencodable(config)
        if where is not None:
            config = repaired(config)
            log.warning("LLM config %s held text that is not valid UTF-8 (in %s): repaired with U+FFFD",
                        config_id, where)
            fixed = True
        if fixed:
            db.execute("UPDATE copilot_llm_configs SET config = ? WHERE config_id = ?", (json.dumps(config), config_id))
            changed = True
    return changed
