"""GNS3 clients for tests and benchmarks: a session of their own, logging in, setting up labs.

The copilot itself only ever acts with the requesting user's token over its
server's one connection pool (``GNS3Connection``, whose ``GNS3Client``s borrow
its session). A client that opens a session of its own, logging in with a
password, logging in again when the token expires or is refused, and creating
nodes without a template or creating, opening, closing or deleting projects are
what tests and benchmarks need to build their labs, so they live here.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any

import aiohttp

from gns3server.agent.gns3_copilot.gns3_client.client import GNS3Client, token_expiry
from gns3server.agent.gns3_copilot.gns3_client.exceptions import GNS3AuthenticationError, GNS3ServerError

__all__ = ["AdminClient", "OwnSessionClient"]


class OwnSessionClient(GNS3Client):
    """A :class:`GNS3Client` with an HTTP session of its own, for a test or a benchmark talking to a
    server alone: made inside a running event loop, closed on leaving ``async with``."""

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(base_url, session=aiohttp.ClientSession(), **kwargs)

    async def close(self) -> None:
        await self._session.close()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class AdminClient(OwnSessionClient):
    """A :class:`GNS3Client` that logs in with ``username``/``password`` on first use, and
    again (once for many concurrent calls) when its token expires or GNS3 refuses it."""

    def __init__(
        self, base_url: str, *, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(base_url, **kwargs)
        self._username = username
        self._password = password
        self._login_lock = asyncio.Lock()

    def _has_credentials(self) -> bool:
        return self._username is not None and self._password is not None

    async def request(self, method: str, path: str, *, json: Any = None, authenticated: bool = True) -> Any:
        if not authenticated or not self._has_credentials():
            return await super().request(method, path, json=json, authenticated=authenticated)
        url = self.url(path)
        token = self._token
        expiry = token_expiry(token) if token is not None else None
        if token is None or (expiry is not None and expiry <= time.time()):
            token = await self._relogin(stale=token)
        status, text, reason = await self._send(method, url, json, token)
        if status == 401:  # revoked, or the server's secret changed: log in once more
            token = await self._relogin(stale=token)
            status, text, reason = await self._send(method, url, json, token)
        return self.decode(status, text, reason, method, url)

    async def _relogin(self, stale: str | None) -> str:
        """Log in unless another task already replaced ``stale``."""
        async with self._login_lock:
            if self._token is not None and self._token != stale:
                return self._token
            return await self.login()

    async def login(self, username: str | None = None, password: str | None = None) -> str:
        """Authenticate; keep and return the token. Credentials that worked are remembered."""
        username = self._username if username is None else username
        password = self._password if password is None else password
        if username is None or password is None:
            raise GNS3AuthenticationError("login needs a username and a password")
        body = await super().request(
            "POST", "/access/users/authenticate", json={"username": username, "password": password},
            authenticated=False,
        )
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise GNS3ServerError("GNS3 login answer has no access_token")
        self._username, self._password, self._token = username, password, token
        return token

    async def version(self) -> dict[str, Any]:
        """The server version (needs no authentication)."""
        return await self.request("GET", "/version", authenticated=False)

    async def create_project(self, name: str, **fields: Any) -> dict[str, Any]:
        """Create (and open) a project."""
        return await self.request("POST", "/projects", json={"name": name, **fields})

    async def open_project(self, project_id: str) -> dict[str, Any]:
        """Open a project (loading its nodes); returns it with its new status."""
        return await self.request("POST", f"/projects/{project_id}/open")

    async def close_project(self, project_id: str) -> None:
        await self.request("POST", f"/projects/{project_id}/close")

    async def delete_project(self, project_id: str) -> None:
        await self.request("DELETE", f"/projects/{project_id}")

    async def create_node(
        self, project_id: str, *, name: str, node_type: str, compute_id: str = "local", **fields: Any
    ) -> dict[str, Any]:
        """Create a node without a template (``fields`` as in GNS3's node schema; the tools use templates)."""
        body = {"name": name, "node_type": node_type, "compute_id": compute_id, **fields}
        return await self.request("POST", f"/projects/{project_id}/nodes", json=body)

    async def node(self, project_id: str, node_id: str) -> dict[str, Any]:
        return await self.request("GET", f"/projects/{project_id}/nodes/{node_id}")
