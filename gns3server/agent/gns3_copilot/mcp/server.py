"""The MCP endpoint: the SDK's low-level server over streamable HTTP, inside gns3-server.

:class:`MCPEndpoint` is opened by the copilot's lifespan (``api/lifecycle.py``)
and closed when it ends. The SDK's session manager needs a task group that lives
as long as the server; it runs in a task of its own (:meth:`MCPEndpoint.start`),
so that opening and closing the endpoint are plain awaits on the lifespan's exit
stack. :class:`MCPRoute` is the
ASGI app mounted at ``/v3/copilot/mcp`` before the server starts: it finds the
open endpoint on ``app.state`` at request time (503 while there is none), then,
before the SDK sees the request, refuses a body the SDK would fail on
(:mod:`.requests`: 400 with a JSON-RPC parse error) and a session or request
over the caller's share (:mod:`.admission`: 429 with a JSON-RPC error).

Why the low-level ``Server`` and not FastMCP: our tools already exist (LangChain
tools with pydantic schemas, bound per call to a user, a project and the console
services), the list a caller sees depends on the caller (read-only keys), and
the app, authentication and lifespan are gns3-server's. FastMCP's strengths
(decorated functions, its own Starlette app and settings, an OAuth provider)
would all be bypassed; see docs/mcp.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl
from starlette.types import Receive, Scope, Send

from ..asgi import read_body, replay_body
from ..gns3_client.client import GNS3Client
from ..gns3_client.exceptions import GNS3Error
from ..teaching.service import TeachingService
from ..tools.approval import DEFAULT_APPROVAL_SECONDS
from ..tools.toolset import ConsoleServices
from .admission import OPENING, Admission
from .approvals import Approvals
from .auth import CALLER_SCOPE_KEY, Authenticator, Caller, MCPAuthMiddleware, UserLookup, json_reply
from .keys import MCPKeyStore
from .projects import ProjectLister
from .prompts import PROMPTS, get_prompt
from .requests import body_problem, jsonrpc_reply
from .resources import TEMPLATES, ResourceError, TopologyResources
from .tools import ToolGateway, text_result

log = logging.getLogger(__name__)

MCP_PATH = "/v3/copilot/mcp"
SERVER_NAME = "gns3-copilot"
INSTRUCTIONS = (
    "Tools of the GNS3 Copilot, acting as your GNS3 user: list projects (gns3_list_projects), then pass "
    "project_id (or select one with gns3_select_project). Read the topology before acting; use show commands "
    "to read devices. Configuration commands need the user's approval; dangerous commands are refused by "
    "the server's policy."
)


class _Server(Server[Any, Any]):
    """The SDK's server, announcing resource subscriptions (which it leaves off by default), whose
    sessions hold the admission ticket of the request that opened them (:mod:`.admission`)."""

    def __init__(self, name: str, admission: Admission, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.admission = admission

    async def run(self, *args: Any, **kwargs: Any) -> None:
        ticket = OPENING.get()  # the SDK starts a session's run from the request that opens it
        if ticket is None:
            await super().run(*args, **kwargs)
            return
        with self.admission.held(ticket):
            await super().run(*args, **kwargs)

    def get_capabilities(
        self, notification_options: NotificationOptions, experimental_capabilities: dict[str, dict[str, Any]]
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(notification_options, experimental_capabilities)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities


def _caller(server: Server[Any, Any]) -> Caller:
    request = server.request_context.request
    caller = request.scope.get(CALLER_SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):  # the auth middleware runs before any request reaches the server
        raise McpError(types.ErrorData(code=types.INVALID_REQUEST, message="Not authenticated"))
    return caller


def _mcp_error(message: str) -> McpError:
    return McpError(types.ErrorData(code=types.INVALID_PARAMS, message=message))


def build_server(gateway: ToolGateway, resources: TopologyResources, admission: Admission) -> Server[Any, Any]:
    """The MCP server's handlers; every one acts as the caller of the request it answers."""
    server = _Server(SERVER_NAME, admission, instructions=INSTRUCTIONS)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return await gateway.definitions(_caller(server))

    # Arguments are checked by each tool's own pydantic schema, per caller (the SDK's
    # input check reads a tool cache shared by every session).
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        caller = _caller(server)
        try:
            return await gateway.call(caller, server.request_context.session, name, arguments)
        except Exception:  # a bug of ours: the details go to the log, never to the client
            log.exception("MCP tool %s failed for %s", name, caller.username)
            return text_result(f"{name} failed unexpectedly; the details are in the GNS3 server log.", error=True)

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        try:
            return await resources.list(_caller(server))
        except GNS3Error as exc:
            raise _mcp_error(f"GNS3 refused: {exc.public_message}") from exc

    @server.list_resource_templates()
    async def list_resource_templates() -> list[types.ResourceTemplate]:
        return TEMPLATES

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        try:
            text = await resources.read(_caller(server), uri)
        except (GNS3Error, ResourceError) as exc:
            raise _mcp_error(exc.public_message) from exc
        return [ReadResourceContents(content=text, mime_type="text/plain")]

    @server.subscribe_resource()
    async def subscribe(uri: AnyUrl) -> None:
        try:
            await resources.subscribe(_caller(server), server.request_context.session, uri)
        except (GNS3Error, ResourceError) as exc:
            raise _mcp_error(exc.public_message) from exc

    @server.unsubscribe_resource()
    async def unsubscribe(uri: AnyUrl) -> None:
        await resources.unsubscribe(server.request_context.session, uri)

    @server.list_prompts()
    async def list_prompts() -> list[types.Prompt]:
        _caller(server)
        return PROMPTS

    @server.get_prompt()
    async def prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        _caller(server)
        try:
            return get_prompt(name, arguments)
        except ValueError as exc:
            raise _mcp_error(str(exc)) from exc

    return server


class MCPEndpoint:
    """The MCP service of one server process: keys, approvals, the SDK server and its sessions."""

    def __init__(
        self, keys: MCPKeyStore, lookup: UserLookup, console: ConsoleServices | None,
        client_factory: Callable[[str], GNS3Client], projects: ProjectLister,
        approval_seconds: float = DEFAULT_APPROVAL_SECONDS, teaching: TeachingService | None = None,
    ) -> None:
        self.keys = keys
        self.approvals = Approvals(approval_seconds)  # [Copilot] approval_minutes, as for the panel's approvals
        self.authenticator = Authenticator(keys, lookup)
        self.gateway = ToolGateway(console, client_factory, self.approvals, projects, approval_seconds, teaching)
        self.resources = TopologyResources(client_factory, keys, projects, console)
        self.admission = Admission()
        self.server = build_server(self.gateway, self.resources, self.admission)
        # Stateful sessions (elicitation and resource notifications need them); the
        # SDK binds each session to the credential that opened it.
        self.sessions = StreamableHTTPSessionManager(self.server)
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls, data_dir: Any, lookup: UserLookup, console: ConsoleServices | None,
        client_factory: Callable[[str], GNS3Client], projects: ProjectLister,
        approval_seconds: float = DEFAULT_APPROVAL_SECONDS, teaching: TeachingService | None = None,
    ) -> MCPEndpoint:
        keys = await MCPKeyStore.open(data_dir)
        try:
            endpoint = cls(keys, lookup, console, client_factory, projects, approval_seconds, teaching)
            await endpoint.start()
        except BaseException:
            await keys.close()  # nothing else is open yet: the sessions' task ended with the error
            raise
        return endpoint

    async def start(self) -> None:
        started = asyncio.Event()

        async def run() -> None:
            async with self.sessions.run():
                started.set()
                await self._stop.wait()

        self._task = asyncio.create_task(run(), name="copilot-mcp-sessions")
        waiter = asyncio.ensure_future(started.wait())
        await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not started.is_set():
            self._task.result()  # raises what stopped it
        log.info("Copilot MCP endpoint ready at %s", MCP_PATH)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stop.is_set()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.sessions.handle_request(scope, receive, send)

    def begin_shutdown(self) -> None:
        """Refuse new MCP requests and end every session now (callable from a signal handler).

        The SDK's event streams are sse-starlette responses, which end by themselves
        when uvicorn is asked to exit; this stops the rest (sessions, their tasks) at once.
        """
        self._loop.call_soon_threadsafe(self._stop.set)

    async def close(self) -> None:
        self._stop.set()
        try:
            if self._task is not None:
                await self._task
        finally:
            await self.resources.close()
            await self.keys.close()
        log.info("Copilot MCP endpoint stopped")


ENDPOINT_STATE = "copilot_mcp"


def endpoint_of(scope: Scope) -> MCPEndpoint | None:
    endpoint = getattr(scope["app"].state, ENDPOINT_STATE, None)
    return endpoint if isinstance(endpoint, MCPEndpoint) and endpoint.running else None


class MCPRoute:
    """The ASGI app at ``/v3/copilot/mcp``: authentication, then the SDK's session manager."""

    def __init__(self) -> None:
        self._app = MCPAuthMiddleware(self._forward, lambda scope: _authenticator(scope))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    @staticmethod
    async def _forward(scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = endpoint_of(scope)
        if endpoint is None:  # stopped since the middleware looked
            await json_reply(send, 503, "The copilot is shutting down.")
            return
        caller: Caller = scope[CALLER_SCOPE_KEY]
        if scope.get("method") == "POST":
            checked = await _checked_body(caller, receive, send)
            if checked is None:
                return
            receive = checked
        await _within_share(endpoint, caller, scope, receive, send)


async def _checked_body(caller: Caller, receive: Receive, send: Send) -> Receive | None:
    """The request's ``receive`` once its body passed :func:`.requests.body_problem` (None: refused, or the client left)."""
    body = await read_body(receive)  # at most the body-size limit: that middleware has read it already
    if body is None:
        return None
    problem = body_problem(body)
    if problem is not None:
        log.info("MCP request of %s refused: %s", caller.username, problem.message)
        await jsonrpc_reply(send, 400, problem.code, problem.message, problem.request_id)
        return None
    return replay_body(body, receive)


async def _within_share(endpoint: MCPEndpoint, caller: Caller, scope: Scope, receive: Receive, send: Send) -> None:
    """Hand the request to the SDK unless it would take the caller past its share (:mod:`.admission`)."""
    admission = endpoint.admission
    session_id = dict(scope.get("headers") or []).get(b"mcp-session-id")
    if session_id is None:  # this request opens a session
        ticket = admission.open(caller)
        if isinstance(ticket, str):
            log.warning("MCP session refused to %s (%s): %s", caller.username, caller.audit_session, ticket)
            await jsonrpc_reply(send, 429, types.INVALID_REQUEST, ticket)
            return
        opening = OPENING.set(ticket)  # inherited by the session's server task, which holds it too
        try:
            with admission.held(ticket, taken=True):
                await endpoint.handle(scope, receive, send)
        finally:
            OPENING.reset(opening)
        return
    if scope.get("method") == "DELETE":  # ending a session frees what it holds: never refused
        await endpoint.handle(scope, receive, send)
        return
    with admission.request(caller, session_id.decode("latin-1")) as admitted:
        if not admitted:
            await jsonrpc_reply(send, 429, types.INVALID_REQUEST, (
                f"Too many requests in flight on this MCP session ({admission.per_session}): wait for one to end"))
            return
        await endpoint.handle(scope, receive, send)


def _authenticator(scope: Scope) -> Authenticator | None:
    endpoint = endpoint_of(scope)
    return endpoint.authenticator if endpoint is not None else None
