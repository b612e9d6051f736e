"""Async client for the GNS3 v3 REST API.

:class:`GNS3Client` holds the policy (base URL, the user's token, timeouts, error
translation) over an ``aiohttp.ClientSession`` that only does I/O. A server opens
one :class:`GNS3Connection` for its whole life (one session, one connection pool)
and hands out a cheap client per user and operation, each sending that user's
token with every request, so GNS3's own access control applies::

    async with GNS3Connection("http://127.0.0.1:3080") as connection:
        async with connection.client(user_token) as client:
            nodes, links = await client.nodes_and_links(project_id)

A client always borrows a session (its connection's, or one a caller owns) and
never closes it, so the copilot cannot open a session per operation by mistake.
Tests and benchmarks that talk to a server alone use
``tests/support/gns3_admin.py``'s ``OwnSessionClient``.

GNS3 3.0 does not check the ``exp`` claim of its own tokens (its JWT decoding
skips claim validation), so the client checks it before sending: an expired token
raises :class:`GNS3AuthenticationError` instead of acting on a stale login.

Tests inject the transport by passing ``session`` rather than patching.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json as _json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import aiohttp

from .exceptions import (
    GNS3APIError,
    GNS3AuthenticationError,
    GNS3ConnectionError,
    GNS3Error,
    GNS3NotFoundError,
    GNS3ServerError,
    GNS3TimeoutError,
    error_for_status,
)

log = logging.getLogger(__name__)

__all__ = ["NODE_ACTIONS", "GNS3Client", "GNS3Connection", "NodeAction", "gather_cancelling"]

NodeAction = Literal["start", "stop", "suspend", "reload"]
NODE_ACTIONS: tuple[NodeAction, ...] = ("start", "stop", "suspend", "reload")

T = TypeVar("T")

# GNS3 appends the server-side traceback to validation messages; it helps nobody
# downstream (and leaks server paths), so it is cut at this marker.
_TRACEBACK_MARKER = '\n\n  File "'


async def gather_cancelling(*aws: Awaitable[T]) -> list[T]:
    """Run awaitables concurrently; on the first failure cancel the rest and re-raise.

    ``asyncio.gather`` alone would leave the siblings of a failed request running
    against the server after the caller has already given up.
    """
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (seconds since the epoch), or None if unreadable."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = _json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def _gns3_message(text: str, reason: str | None) -> str:
    """GNS3's ``message`` (or FastAPI's ``detail``) from an error body, without traceback."""
    message: Any = None
    try:
        body = _json.loads(text) if text else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = body.get("message", body.get("detail"))
    if message is None:
        message = text.strip()[:500] or reason or "no message"
    message = str(message)
    return message.split(_TRACEBACK_MARKER, 1)[0].strip()


def _check_id(value: str, what: str) -> str:
    """Refuse a malformed id before sending: GNS3 would answer 422 with a traceback."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise GNS3NotFoundError(f"{what} {value!r} is not a GNS3 id (a UUID)") from None


def find_named(items: Sequence[Mapping[str, Any]], wanted: str) -> Mapping[str, Any] | None:
    """The item (node, template ...) named ``wanted``: exactly, else ignoring case; or None."""
    for exact in (True, False):
        for item in items:
            name = str(item.get("name", ""))
            if name == wanted if exact else name.casefold() == wanted.casefold():
                return item
    return None


def _find_endpoint(nodes: Sequence[Mapping[str, Any]], node_ref: str, port_ref: str) -> dict[str, Any]:
    """The link endpoint for a node (id or name) and a port (name or short name)."""
    node = next((n for n in nodes if n.get("node_id") == node_ref), None) or find_named(nodes, node_ref)
    if node is None:
        raise GNS3NotFoundError(f"no node {node_ref!r} in the project")
    ports = node.get("ports") or []
    wanted = port_ref.casefold()
    for exact in (True, False):
        for port in ports:
            names = (port.get("name"), port.get("short_name"))
            if (port_ref in names) if exact else any(str(n).casefold() == wanted for n in names if n):
                return {
                    "node_id": node["node_id"],
                    "adapter_number": port["adapter_number"],
                    "port_number": port["port_number"],
                }
    available = ", ".join(str(p.get("short_name") or p.get("name")) for p in ports) or "none"
    raise GNS3NotFoundError(f"node {node.get('name')!r} has no port {port_ref!r} (ports: {available})")


class GNS3Client:
    """A GNS3 v3 API client bound to one server and one user's bearer token.

    ``base_url`` is the server root (``http://host:3080``; a trailing ``/v3`` is
    accepted). ``timeout`` bounds every call as a whole, ``connect_timeout`` the TCP
    connection. The client borrows ``session`` (a :class:`GNS3Connection`'s) and
    never closes it: ``async with`` a client costs nothing, and its owner closes it.
    """

    def __init__(
        self,
        base_url: str,
        *,
        session: aiohttp.ClientSession,
        token: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float | None = 10.0,
    ) -> None:
        self._base_url = base_url.rstrip("/").removesuffix("/v3")
        self._token = token
        self._timeout_seconds = timeout
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=connect_timeout)
        self._session = session

    def __repr__(self) -> str:
        return f"<GNS3Client {self._base_url}>"

    @property
    def base_url(self) -> str:
        """The server root URL, without the ``/v3`` prefix."""
        return self._base_url

    @property
    def token(self) -> str | None:
        """The bearer token sent with every authenticated request."""
        return self._token

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Nothing to close: the session is its owner's."""

    # -- transport boundary -------------------------------------------------

    async def _send(
        self, method: str, url: str, json_body: Any, token: str | None
    ) -> tuple[int, str, str | None]:
        """One HTTP exchange; every aiohttp/asyncio failure becomes a GNS3Error."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        started = time.perf_counter()
        try:
            async with self._session.request(
                method, url, json=json_body, headers=headers, timeout=self._timeout
            ) as response:
                text = await response.text()
                status, reason = response.status, response.reason
        except TimeoutError as exc:
            raise GNS3TimeoutError(
                f"GNS3 server at {url} did not answer {method} within {self._timeout_seconds:g} s",
                url=url,
                timeout=self._timeout_seconds,
            ) from exc
        except aiohttp.ClientConnectionError as exc:
            raise GNS3ConnectionError(
                f"cannot reach the GNS3 server at {url} ({type(exc).__name__}: {exc})", url=url
            ) from exc
        except aiohttp.ClientError as exc:
            raise GNS3Error(f"{method} {url} failed ({type(exc).__name__}: {exc})") from exc
        log.debug("%s %s -> %s in %.1f ms", method, url, status, (time.perf_counter() - started) * 1000)
        return status, text, reason

    def url(self, path: str) -> str:
        """The full URL of API path ``path`` (``/projects`` -> ``http://host:port/v3/projects``)."""
        return f"{self._base_url}/v3{path}"

    @staticmethod
    def decode(status: int, text: str, reason: str | None, method: str, url: str) -> Any:
        """GNS3's answer as JSON (None when empty), or the GNS3Error its status means."""
        if status >= 400:
            raise error_for_status(status, _gns3_message(text, reason), method=method, url=url)
        if not text:
            return None
        try:
            return _json.loads(text)
        except ValueError as exc:
            raise GNS3ServerError(
                "GNS3 sent a body that is not JSON", status=status, method=method, url=url
            ) from exc

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        authenticated: bool = True,
    ) -> Any:
        """Call ``/v3{path}`` and return the decoded JSON body (None when empty).

        The public low-level entry point: the typed methods below use it, and so may
        callers needing a route the client does not wrap yet.
        """
        url = self.url(path)
        token = self._valid_token(method, url) if authenticated else None
        status, text, reason = await self._send(method, url, json, token)
        return self.decode(status, text, reason, method, url)

    # -- authentication -----------------------------------------------------

    def _valid_token(self, method: str, url: str) -> str:
        """The token to send; GNS3AuthenticationError when there is none or it has expired."""
        token = self._token
        if token is None:
            raise GNS3AuthenticationError("no GNS3 token to act with", method=method, url=url)
        expiry = token_expiry(token)
        if expiry is not None and expiry <= time.time():
            expired_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expiry))
            raise GNS3AuthenticationError(
                f"the GNS3 token expired at {expired_at}; log in to GNS3 again", method=method, url=url
            )
        return token

    # -- projects and templates ---------------------------------------------

    async def projects(self) -> list[dict[str, Any]]:
        """Projects visible to the user."""
        return await self.request("GET", "/projects")

    async def project(self, project_id: str) -> dict[str, Any]:
        """One project (raises :class:`GNS3NotFoundError` if unknown)."""
        return await self.request("GET", f"/projects/{_check_id(project_id, 'project')}")

    async def notifications(self, project_id: str, *, read_timeout: float = 30.0) -> AsyncIterator[dict[str, Any]]:
        """The project's notification stream (one JSON object per line, a ``ping`` every few seconds).

        Runs until the caller stops iterating or GNS3 ends the stream; no overall
        timeout, but a silence longer than ``read_timeout`` is a GNS3TimeoutError.
        """
        url = f"{self._base_url}/v3/projects/{_check_id(project_id, 'project')}/notifications"
        token = self._valid_token("GET", url)
        timeout = aiohttp.ClientTimeout(total=None, connect=self._timeout.connect, sock_read=read_timeout)
        try:
            async with self._session.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as response:
                if response.status >= 400:
                    raise error_for_status(response.status, _gns3_message(await response.text(), response.reason),
                                           method="GET", url=url)
                async for line in response.content:
                    if line.strip():
                        yield _json.loads(line)
        except TimeoutError as exc:
            raise GNS3TimeoutError(f"GNS3 notification stream at {url} went silent", url=url, timeout=read_timeout) from exc
        except aiohttp.ClientError as exc:
            raise GNS3ConnectionError(f"GNS3 notification stream at {url} failed ({type(exc).__name__})", url=url) from exc

    async def templates(self) -> list[dict[str, Any]]:
        """Templates the user may use to create nodes."""
        return await self.request("GET", "/templates")

    async def template(self, template_id: str) -> dict[str, Any]:
        """One template, as GNS3 returns it (404 if there is none)."""
        return await self.request("GET", f"/templates/{_check_id(template_id, 'template')}")

    # -- nodes and links ----------------------------------------------------

    async def nodes(self, project_id: str) -> list[dict[str, Any]]:
        """Nodes of a project, as GNS3 returns them."""
        return await self.request("GET", f"/projects/{_check_id(project_id, 'project')}/nodes")

    async def node(self, project_id: str, node_id: str) -> dict[str, Any]:
        """One node of a project (GNS3 checks ``Node.Audit``; 404 if there is none)."""
        pid, nid = _check_id(project_id, "project"), _check_id(node_id, "node")
        return await self.request("GET", f"/projects/{pid}/nodes/{nid}")

    async def links(self, project_id: str) -> list[dict[str, Any]]:
        """Links of a project, as GNS3 returns them."""
        return await self.request("GET", f"/projects/{_check_id(project_id, 'project')}/links")

    async def nodes_and_links(self, project_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Nodes and links of a project, fetched concurrently."""
        nodes, links = await gather_cancelling(self.nodes(project_id), self.links(project_id))
        return nodes, links

    async def node_action(self, project_id: str, action: NodeAction, node_id: str | None = None) -> None:
        """Start, stop, suspend or reload one node, or every node when ``node_id`` is None.

        GNS3 answers 409 (:class:`GNS3ConflictError`) when the node cannot do it,
        e.g. a missing emulator binary.
        """
        if action not in NODE_ACTIONS:
            raise ValueError(f"unknown node action {action!r}; expected one of {', '.join(NODE_ACTIONS)}")
        pid = _check_id(project_id, "project")
        if node_id is None:
            await self.request("POST", f"/projects/{pid}/nodes/{action}")
        else:
            # The single-node start route requires a JSON body; {} is accepted by all four.
            await self.request("POST", f"/projects/{pid}/nodes/{_check_id(node_id, 'node')}/{action}", json={})

    async def update_node(self, project_id: str, node_id: str, **fields: Any) -> dict[str, Any]:
        """Change node settings (name, position, properties, ...)."""
        pid, nid = _check_id(project_id, "project"), _check_id(node_id, "node")
        return await self.request("PUT", f"/projects/{pid}/nodes/{nid}", json=fields)

    async def create_node_from_template(
        self,
        project_id: str,
        template_id: str,
        *,
        x: int = 0,
        y: int = 0,
        name: str | None = None,
        compute_id: str | None = None,
    ) -> dict[str, Any]:
        """Create a node from a template; without ``name`` GNS3 picks one from the template.

        GNS3 3.0 ignores a name in this route, so a wanted name is set afterwards.
        """
        pid, tid = _check_id(project_id, "project"), _check_id(template_id, "template")
        body: dict[str, Any] = {"x": x, "y": y}
        if compute_id is not None:
            body["compute_id"] = compute_id
        node = await self.request("POST", f"/projects/{pid}/templates/{tid}", json=body)
        if name is not None and node.get("name") != name:
            node = await self.update_node(pid, node["node_id"], name=name)
        return node

    async def link(self, project_id: str, link_id: str) -> dict[str, Any]:
        """One link of a project (its ``suspend`` state and ``filters`` included)."""
        pid, lid = _check_id(project_id, "project"), _check_id(link_id, "link")
        return await self.request("GET", f"/projects/{pid}/links/{lid}")

    async def link_filters(self, project_id: str, link_id: str) -> list[dict[str, Any]]:
        """The filters the link can apply (none when neither node type supports filtering)."""
        pid, lid = _check_id(project_id, "project"), _check_id(link_id, "link")
        return await self.request("GET", f"/projects/{pid}/links/{lid}/available_filters")

    async def update_link(self, project_id: str, link_id: str, **fields: Any) -> dict[str, Any]:
        """Change a link (``suspend``, ``filters`` ...; GNS3 needs ``Link.Modify``)."""
        pid, lid = _check_id(project_id, "project"), _check_id(link_id, "link")
        return await self.request("PUT", f"/projects/{pid}/links/{lid}", json=fields)

    async def create_link(
        self,
        project_id: str,
        node_a: str,
        port_a: str,
        node_b: str,
        port_b: str,
        *,
        nodes: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Link two ports named like GNS3 names them (``e0`` or ``Ethernet0``).

        Nodes are given by name or id; pass ``nodes`` (the project's node list) to
        skip fetching it, e.g. when creating many links. An unknown node or port
        raises :class:`GNS3NotFoundError`; a port already in use, GNS3's 409.
        """
        if nodes is None:
            nodes = await self.nodes(project_id)
        endpoints = [_find_endpoint(nodes, node_a, port_a), _find_endpoint(nodes, node_b, port_b)]
        return await self.request(
            "POST", f"/projects/{_check_id(project_id, 'project')}/links", json={"nodes": endpoints}
        )

    async def snapshots(self, project_id: str) -> list[dict[str, Any]]:
        """The project's snapshots, oldest first (GNS3 needs ``Snapshot.Audit``)."""
        return await self.request("GET", f"/projects/{_check_id(project_id, 'project')}/snapshots")

    async def create_snapshot(self, project_id: str, name: str) -> dict[str, Any]:
        """Snapshot the project as it is now (GNS3 needs ``Snapshot.Allocate``; names are unique per project)."""
        return await self.request("POST", f"/projects/{_check_id(project_id, 'project')}/snapshots", json={"name": name})

    async def restore_snapshot(self, project_id: str, snapshot_id: str) -> dict[str, Any]:
        """Put the project back as the snapshot holds it (GNS3 needs ``Snapshot.Restore``; it closes and
        reopens the project, stopping its nodes)."""
        pid, sid = _check_id(project_id, "project"), _check_id(snapshot_id, "snapshot")
        try:
            return await self.request("POST", f"/projects/{pid}/snapshots/{sid}/restore")
        except GNS3APIError as exc:
            if not _files_still_going(exc):
                raise
            # GNS3 3.0 asks the computes to delete the project and removes its files itself at
            # the same time; under load the two meet ("[Errno 39] Directory not empty") after
            # the project was closed and before the snapshot was imported. Once the computes
            # are done, the same restore succeeds: re-read the project (closed now), then once more.
            project = await self.project(pid)
            log.warning("Snapshot %s of project %s: GNS3 failed to clear the project's files (%s); the project "
                        "is %s, restoring once more", sid, pid, exc.message, project.get("status"))
            return await self.request("POST", f"/projects/{pid}/snapshots/{sid}/restore")


def _files_still_going(exc: GNS3APIError) -> bool:
    """GNS3's snapshot restore failing on its own file removal racing the computes' (errno 39, ENOTEMPTY)."""
    return exc.status == 409 and "[Errno 39]" in exc.message  # ControllerError: 409


class GNS3Connection:
    """One server's HTTP connection pool, open for the server's whole life.

    One ``aiohttp.ClientSession`` (keep-alive connections reused by every user and
    every operation); :meth:`client` gives a per-user :class:`GNS3Client` over it
    that costs no session of its own. ``limit`` caps the simultaneous connections.
    """

    def __init__(self, base_url: str, *, limit: int = 100, verify_tls: bool = True, timeout: float = 30.0) -> None:
        self._base_url = base_url
        self._limit = limit
        self._verify_tls = verify_tls
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        if self._session is not None:
            raise RuntimeError("GNS3Connection is already open")
        connector = aiohttp.TCPConnector(limit=self._limit, ssl=self._verify_tls)  # True: verified with the default context
        self._session = aiohttp.ClientSession(connector=connector)
        return self

    def client(self, token: str) -> GNS3Client:
        """A client acting as the user whose token this is (entering and leaving it costs nothing)."""
        if self._session is None:
            raise RuntimeError("the GNS3 connection is not open")
        return GNS3Client(self._base_url, token=token, timeout=self._timeout, session=self._session)

    async def close(self) -> None:
        """Close the session (idempotent); its clients' requests fail from then on."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
