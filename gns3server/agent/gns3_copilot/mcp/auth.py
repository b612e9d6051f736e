"""Who an MCP request acts as: a GNS3 user, from a GNS3 token or one of their MCP keys.

Every HTTP request to the MCP endpoint is authenticated afresh (so a revoked key,
a deactivated or deleted user stops working at the next call):

* a GNS3 JWT (``Authorization: Bearer <token>``) is checked the way gns3-server
  checks it (its own ``auth_service``), plus the ``exp`` claim that GNS3 3.0
  leaves unchecked; the tools then use that very token;
* an MCP key (``gns3c_mcp_...``) is looked up by digest; the tools then act with
  a short-lived GNS3 JWT minted in-process for the key's user by GNS3's own
  ``auth_service.create_access_token``, so GNS3's RBAC judges every tool call
  exactly as it would judge that user.

In both cases the user is read from GNS3's database and must exist and be
active. :class:`MCPAuthMiddleware` puts the resulting :class:`Caller` in the ASGI
scope (and the SDK's ``AuthenticatedUser`` in ``scope["user"]``, which binds an
MCP session to the credential that opened it).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import HTTPException
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import CopilotError, ErrorKind
from ..gns3_client.client import token_expiry
from .keys import MCPKey, MCPKeyStore, looks_like_key

log = logging.getLogger(__name__)

CALLER_SCOPE_KEY = "gns3_copilot.mcp_caller"
MINTED_TOKEN_MINUTES = 15
REMINT_MARGIN_SECONDS = 120.0


class MCPAuthError(CopilotError):
    """The request carries no usable credential; ``str()`` is safe to send."""

    code = "mcp_unauthenticated"
    kind = ErrorKind.UNAUTHENTICATED


@dataclass
class Caller:
    """The GNS3 user an MCP request acts as, and through which credential."""

    user_id: str
    username: str
    is_superadmin: bool
    key: MCPKey | None = None
    _token: str = field(default="", repr=False)
    _mint: Callable[[], str] | None = field(default=None, repr=False)

    @property
    def read_only(self) -> bool:
        return self.key is not None and self.key.read_only

    @property
    def credential_id(self) -> str:
        """Stable per credential: a session opened with it can only be used with it."""
        return f"mcp-key:{self.key.key_id}" if self.key else f"gns3-user:{self.user_id}"

    @property
    def audit_session(self) -> str:
        """What the console audit's session column shows for calls through MCP."""
        return f"mcp:key:{self.key.name}" if self.key else "mcp:token"

    def token(self) -> str:
        """A GNS3 JWT for this user, minted again when a minted one is about to expire."""
        if self._mint is not None:
            expiry = token_expiry(self._token) if self._token else None
            if expiry is None or expiry - time.time() < REMINT_MARGIN_SECONDS:
                self._token = self._mint()
        return self._token


UserLookup = Callable[[str, str], Any]
"""``await lookup(kind, value)`` with kind ``username`` or ``user_id``: GNS3's user record or None."""


def gns3_user_lookup(engine: Any) -> UserLookup:
    """Read users from gns3-server's own database, with its own repository."""
    from gns3server.db.repositories.users import UsersRepository
    from sqlalchemy.ext.asyncio import AsyncSession

    async def lookup(kind: str, value: str) -> Any:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            users = UsersRepository(session)
            if kind == "username":
                return await users.get_user_by_username(value)
            return await users.get_user(uuid.UUID(value))

    return lookup


class Authenticator:
    """Turns a bearer credential into a :class:`Caller`, or refuses it (MCPAuthError)."""

    def __init__(self, keys: MCPKeyStore, lookup: UserLookup) -> None:
        self._keys = keys
        self._lookup = lookup

    async def caller(self, bearer: str | None) -> Caller:
        if not bearer:
            raise MCPAuthError("Not authenticated: send a GNS3 token or an MCP key as a bearer token")
        if looks_like_key(bearer):
            return await self._from_key(bearer)
        return await self._from_jwt(bearer)

    async def _from_jwt(self, token: str) -> Caller:
        from gns3server.services import auth_service

        try:
            username = auth_service.get_username_from_token(token)
        except HTTPException as exc:
            raise MCPAuthError("Invalid GNS3 token") from exc
        expiry = token_expiry(token)
        if expiry is not None and expiry <= time.time():
            raise MCPAuthError("The GNS3 token has expired; log in again")
        user = await self._active_user("username", str(username))
        return Caller(str(user.user_id), user.username, bool(user.is_superadmin), _token=token)

    async def _from_key(self, secret: str) -> Caller:
        from gns3server.services import auth_service

        key = await self._keys.verify(secret)
        if key is None:
            raise MCPAuthError("Unknown, revoked or expired MCP key")
        user = await self._active_user("user_id", key.user_id)
        username = user.username

        def mint() -> str:
            return str(auth_service.create_access_token(username, expires_in=MINTED_TOKEN_MINUTES))

        return Caller(str(user.user_id), username, bool(user.is_superadmin), key=key, _mint=mint)

    async def _active_user(self, kind: str, value: str) -> Any:
        user = await self._lookup(kind, value)
        if user is None:
            raise MCPAuthError("The GNS3 user of this credential no longer exists")
        if not user.is_active and not user.is_superadmin:  # GNS3's own rule: a superadmin is always active
            raise MCPAuthError("The GNS3 user of this credential is not active")
        return user


def bearer_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credential = value.decode("latin-1").partition(" ")
            return credential.strip() if scheme.lower() == "bearer" else None
    return None


class MCPAuthMiddleware:
    """ASGI: 401 without a usable credential, else the request goes on with its caller in the scope."""

    def __init__(self, app: ASGIApp, authenticator: Callable[[Scope], Authenticator | None]) -> None:
        self.app = app
        self._authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authenticator = self._authenticator(scope)
        if authenticator is None:
            await json_reply(send, 503, "The copilot is not running on this server (starting or shutting down).")
            return
        try:
            caller = await authenticator.caller(bearer_of(scope))
        except MCPAuthError as exc:
            log.info("MCP request refused: %s", exc)
            await json_reply(send, 401, str(exc), {"www-authenticate": 'Bearer realm="gns3-copilot-mcp"'})
            return
        scope[CALLER_SCOPE_KEY] = caller
        access = AccessToken(
            token=caller.credential_id, client_id=caller.credential_id, subject=caller.user_id,
            scopes=["read_only" if caller.read_only else "full"],
        )
        scope["user"] = AuthenticatedUser(access)
        await self.app(scope, receive, send)


async def json_reply(send: Send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"message": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
