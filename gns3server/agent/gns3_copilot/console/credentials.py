"""Device console credentials: what a console's login asks for, stored encrypted.

A node's console may ask for a login (a getty's ``login:``, IOS's ``Username:``),
and its enable mode for a password. An administrator, or a user GNS3 lets edit the
node (or the template), sets them per node or per template (``api/routes/
console_credentials.py`` asks GNS3's own check); a node's own credentials win over
its template's. Passwords are encrypted with the server key that encrypts LLM API
keys (``api/crypto.py``), in a SQLite file of their own (a :class:`..db.Database`
with its versioned schema); the username too, as it is half of a login.

They leave the store for one purpose only: to be typed into that device's console
by the session (``session.py``). They are never returned by a route (masked at
most), never written to a log line or the audit (which records that they were set
and used, by whom), and never part of a tool result or anything the model sees.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ..db import Database, Migration, Schema
from ..errors import CopilotError, ErrorKind
from .telnet import ConsoleError

DATABASE_NAME = "copilot_console_credentials.sqlite3"
Scope = Literal["node", "template"]
SCOPES: tuple[Scope, ...] = ("node", "template")

CREDENTIALS_SCHEMA = Schema("console_credentials", (
    Migration(1, (
        """CREATE TABLE IF NOT EXISTS copilot_console_credentials (
            scope       TEXT NOT NULL,
            scope_id    TEXT NOT NULL,
            project_id  TEXT NOT NULL DEFAULT '',
            username    TEXT,
            password    TEXT,
            enable_password TEXT,
            set_by      TEXT NOT NULL,
            updated_at  REAL NOT NULL,
            PRIMARY KEY (scope, scope_id)
        )""",
    ), "console credentials per node and per template"),
))


class SecretCipher(Protocol):
    """What encrypts the secrets (``api.crypto.SecretBox``); ``decrypt`` raises a CopilotError
    when the token no longer decrypts."""

    def encrypt(self, secret: str) -> str: ...

    def decrypt(self, token: str) -> str: ...


class CredentialsUnreadableError(ConsoleError):
    """Stored console credentials no longer decrypt (the server key was replaced): set them again."""

    code = "console_credentials_unreadable"
    kind = ErrorKind.CONFLICT


@dataclass(frozen=True, repr=False)
class Credentials:
    """What a console login and enable ask for; ``source`` says whose they are (node, template)."""

    username: str | None = None
    password: str | None = None
    enable_password: str | None = None
    source: str = "node"

    def __repr__(self) -> str:
        return f"<Credentials of the {self.source}{' for ' + mask(self.username) if self.username else ''}>"


def mask(value: str | None) -> str:
    """What may be shown of a credential: its first character, the rest starred (never a password)."""
    if not value:
        return ""
    return value[0] + "***"


@dataclass(frozen=True)
class CredentialsInfo:
    """A stored record as it may be shown: which fields are set, the username masked."""

    scope: Scope
    scope_id: str
    project_id: str
    username: str
    password_set: bool
    enable_password_set: bool
    set_by: str
    updated_at: float


class CredentialStore:
    """Console credentials per node and per template (schema: :data:`CREDENTIALS_SCHEMA`)."""

    def __init__(self, database: Database, cipher: SecretCipher) -> None:
        self._database = database
        self._cipher = cipher

    @classmethod
    async def open(cls, data_dir: Path, cipher: SecretCipher) -> CredentialStore:
        return cls(await Database.open(Path(data_dir) / DATABASE_NAME, (CREDENTIALS_SCHEMA,), name="console-credentials"), cipher)

    async def close(self) -> None:
        await self._database.close()

    def _seal(self, value: str | None) -> str | None:
        return self._cipher.encrypt(value) if value else None

    def _open(self, token: str | None, scope: str) -> str | None:
        if not token:
            return None
        try:
            return self._cipher.decrypt(token)
        except CopilotError:
            raise CredentialsUnreadableError(
                f"the console credentials of this {scope} cannot be decrypted (the copilot's server key changed); "
                "set them again"
            ) from None

    async def set(
        self, scope: Scope, scope_id: str, credentials: Credentials, *, project_id: str = "", set_by: str
    ) -> CredentialsInfo:
        """Store (replace) the credentials of one node or template."""
        if scope not in SCOPES:
            raise ValueError(f"scope: must be one of {', '.join(SCOPES)}")
        if not (credentials.username or credentials.password or credentials.enable_password):
            raise ValueError("credentials: give a username, a password or an enable_password")
        await self._database.execute(
            "INSERT INTO copilot_console_credentials"
            " (scope, scope_id, project_id, username, password, enable_password, set_by, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, scope_id) DO UPDATE SET"
            " project_id = excluded.project_id, username = excluded.username, password = excluded.password,"
            " enable_password = excluded.enable_password, set_by = excluded.set_by, updated_at = excluded.updated_at",
            (scope, scope_id, project_id, self._seal(credentials.username), self._seal(credentials.password),
             self._seal(credentials.enable_password), set_by, time.time()),
        )
        info = await self.info(scope, scope_id)
        assert info is not None
        return info

    async def delete(self, scope: Scope, scope_id: str) -> bool:
        """Forget them; False if there were none."""
        return bool(await self._database.execute(
            "DELETE FROM copilot_console_credentials WHERE scope = ? AND scope_id = ?", (scope, scope_id)
        ))

    async def _row(self, scope: Scope, scope_id: str) -> Sequence[Any] | None:
        return await self._database.fetchone(
            "SELECT scope, scope_id, project_id, username, password, enable_password, set_by, updated_at"
            " FROM copilot_console_credentials WHERE scope = ? AND scope_id = ?", (scope, scope_id)
        )

    async def info(self, scope: Scope, scope_id: str) -> CredentialsInfo | None:
        """What is set, as it may be shown (username masked, passwords as flags only)."""
        row = await self._row(scope, scope_id)
        if row is None:
            return None
        username = self._open(row[3], scope)
        return CredentialsInfo(row[0], row[1], row[2], mask(username), row[4] is not None, row[5] is not None,
                               row[6], row[7])

    async def for_console(self, node_id: str, template_id: str | None) -> Credentials | None:
        """The credentials to type into a node's console: the node's own, else its template's."""
        for scope, scope_id in (("node", node_id), ("template", template_id)):
            if not scope_id:
                continue
            row = await self._row(scope, scope_id)  # type: ignore[arg-type]
            if row is not None:
                username, password, enable = (self._open(v, scope) for v in row[3:6])
                return Credentials(username, password, enable, source=scope)
        return None
