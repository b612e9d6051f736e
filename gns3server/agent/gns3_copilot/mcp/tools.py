"""The copilot's own tools, offered over MCP with the same rules as in the panel.

Nothing is re-implemented here: every call builds the copilot's tool set
(:func:`build_tools`) for the caller, so the command policy, device locks,
console audit and the tools' own checks apply as they do for the agent; the
tools reach GNS3 with the caller's GNS3 identity, so GNS3's RBAC applies too.
What MCP adds:

* a ``project_id`` argument on every project tool (or the project chosen for the
  MCP session with ``gns3_select_project``), checked by reading the project as
  the caller before anything runs; ``gns3_list_projects`` lists what the caller
  may read (:mod:`.projects`: GNS3's own check on each project);
* the read-only tool set for read-only keys (tools whose ``metadata`` says
  ``read_only``);
* approval for tools whose ``metadata`` says ``needs_confirmation``: through
  MCP elicitation when the client supports it, else an approval id that the
  user decides in the copilot's API, after which the client repeats the call
  with ``approval_id`` (:mod:`.approvals`).

Every call then runs through the tool gate (:class:`~..tools.gate.ToolGate`), as
the agent's do: its flags, the approval checked against exactly the call (the one
digest format, bound to the project), the tools' error policy.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from mcp import types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from pydantic import BaseModel, ValidationError

from ..as_data import json_as_data
from ..errors import CopilotError
from ..gns3_client.client import GNS3Client
from ..gns3_client.exceptions import GNS3Error
from ..teaching.service import TeachingService, learner_for
from ..teaching.tools import teaching_tools
from ..tools.approval import DEFAULT_APPROVAL_SECONDS, ApprovalGrant
from ..tools.errors import TOOL_ERRORS, failure_outcome
from ..tools.gate import REJECTED, Approved, ToolGate, is_read_only, needs_confirmation, validation_summary
from ..tools.toolset import ConsoleServices, RunContext, build_tools
from .approvals import Approval, Approvals
from .auth import Caller
from .projects import ProjectLister
from .resources import topology_text

log = logging.getLogger(__name__)

LIST_PROJECTS = "gns3_list_projects"
SELECT_PROJECT = "gns3_select_project"
TOPOLOGY_TEXT = "gns3_topology_text"
PROJECT_HELP = "UUID of the GNS3 project (see gns3_list_projects); may be left out once one is selected with gns3_select_project."
APPROVAL_HELP = (
    "Only when repeating a call that returned 'waiting for approval': the approval_id it gave, once the user "
    "has approved it."
)
APPROVAL_ROUTE = "/v3/copilot/mcp/approvals/{approval_id}"
_PLACEHOLDER_PROJECT = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class _Entry:
    definition: types.Tool
    read_only: bool
    needs_confirmation: bool


def _mcp_definition(tool: BaseTool) -> _Entry:
    """The MCP form of a copilot tool: its schema plus ``project_id`` (and ``approval_id``)."""
    read_only, confirm = is_read_only(tool), needs_confirmation(tool)
    args_schema = tool.args_schema
    assert isinstance(args_schema, type) and issubclass(args_schema, BaseModel)  # every copilot tool has one
    schema = args_schema.model_json_schema()
    properties = dict(schema.get("properties", {}))
    properties["project_id"] = {"type": "string", "description": PROJECT_HELP}
    if confirm:
        properties["approval_id"] = {"type": "string", "description": APPROVAL_HELP}
    schema["properties"] = properties
    schema["required"] = [name for name in schema.get("required", []) if name != "project_id"]
    schema.pop("title", None)
    description = tool.description.replace("the open project", "the project")
    if confirm:
        description += " The user approves each call (asked through the client, or with an approval id)."
    annotations = types.ToolAnnotations(readOnlyHint=read_only, destructiveHint=not read_only)
    definition = types.Tool(name=tool.name, description=description, inputSchema=schema, annotations=annotations)
    return _Entry(definition, read_only, confirm)


_OWN_TOOLS = {
    LIST_PROJECTS: _Entry(
        types.Tool(
            name=LIST_PROJECTS,
            description="List the GNS3 projects you may see: name, project_id and status (opened or closed).",
            inputSchema={"type": "object", "properties": {}},
            annotations=types.ToolAnnotations(readOnlyHint=True),
        ),
        read_only=True, needs_confirmation=False,
    ),
    SELECT_PROJECT: _Entry(
        types.Tool(
            name=SELECT_PROJECT,
            description="Choose the project the other tools use when they are called without project_id "
            "(for this MCP session).",
            inputSchema={
                "type": "object",
                "properties": {"project_id": {"type": "string", "description": "UUID of the project"}},
                "required": ["project_id"],
            },
            annotations=types.ToolAnnotations(readOnlyHint=True),
        ),
        read_only=True, needs_confirmation=False,
    ),
    TOPOLOGY_TEXT: _Entry(
        types.Tool(
            name=TOPOLOGY_TEXT,
            description="The project's topology as compact text (nodes with type, status, console and linked "
            "ports; links): the quick overview. gns3_topology gives the same as structured data.",
            inputSchema={"type": "object", "properties": {"project_id": {"type": "string", "description": PROJECT_HELP}}},
            annotations=types.ToolAnnotations(readOnlyHint=True),
        ),
        read_only=True, needs_confirmation=False,
    ),
}


def text_result(data: Any, *, error: bool = False) -> types.CallToolResult:
    """A tool result as JSON text, with structured content when it is an object."""
    text = data if isinstance(data, str) else json_as_data(data, indent=1)
    structured = data if isinstance(data, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structuredContent=structured, isError=error
    )


class ToolGateway:
    """Lists and runs the copilot's tools for MCP callers."""

    def __init__(
        self,
        console: ConsoleServices | None,
        client_factory: Callable[[str], GNS3Client],
        approvals: Approvals,
        projects: ProjectLister,
        approval_seconds: float = DEFAULT_APPROVAL_SECONDS,
        teaching: TeachingService | None = None,
    ) -> None:
        self._console = console
        self._teaching = teaching
        self._client_factory = client_factory
        self.approvals = approvals
        self._projects = projects
        self._approval_seconds = approval_seconds  # how long elicitation waits, as an approval by id stays valid
        self._catalogue: dict[str, _Entry] | None = None
        self._selected: weakref.WeakKeyDictionary[ServerSession, str] = weakref.WeakKeyDictionary()

    def _tools(self, caller: Caller, project_id: str) -> list[BaseTool]:
        context = RunContext(
            client_factory=lambda: self._client_factory(caller.token()), project_id=project_id,
            username=caller.username, session_id=caller.audit_session, user_id=caller.user_id,
        )
        tools = build_tools(context, self._console)
        if self._teaching is not None:  # graded labs: a teacher's agent assigns and collects, a student checks
            who = learner_for(caller.user_id, caller.username, lambda: self._client_factory(caller.token()),
                              self._console)
            tools += teaching_tools(self._teaching, who, project_id)
        return tools

    async def catalogue(self) -> dict[str, _Entry]:
        """Every tool's MCP definition (built once: tool construction is pydantic work, off the loop)."""
        if self._catalogue is None:
            dummy = Caller("", "", False)
            tools = await asyncio.to_thread(self._tools, dummy, _PLACEHOLDER_PROJECT)
            self._catalogue = {**_OWN_TOOLS, **{t.name: _mcp_definition(t) for t in tools}}
        return self._catalogue

    async def definitions(self, caller: Caller) -> list[types.Tool]:
        """The tools this caller may use (the read-only ones for a read-only key)."""
        return [e.definition for e in (await self.catalogue()).values() if e.read_only or not caller.read_only]

    async def call(
        self, caller: Caller, session: ServerSession, name: str, arguments: Mapping[str, Any]
    ) -> types.CallToolResult:
        entry = (await self.catalogue()).get(name)
        if entry is None or (caller.read_only and not entry.read_only):
            why = " (this MCP key is read-only)" if entry is not None else ""
            return text_result(f"Unknown tool: {name}{why}", error=True)
        args = dict(arguments)
        log.info("MCP tool call %s by %s (%s)", name, caller.username, caller.audit_session)
        try:
            if name == LIST_PROJECTS:
                return text_result(await self._list_projects(caller))
            project_id = str(args.pop("project_id", None) or self._selected.get(session) or "")
            if not project_id:
                return text_result("project_id: required (or select a project with gns3_select_project)", error=True)
            project = await self._check_project(caller, project_id)
            if name == SELECT_PROJECT:
                self._selected[session] = project_id
                return text_result({"selected": project_id, "name": project.get("name")})
            if name == TOPOLOGY_TEXT:
                async with self._client_factory(caller.token()) as client:
                    return text_result(await topology_text(client, project_id, self._console))
            return await self._run(caller, session, entry, name, project_id, args)
        except GNS3Error as exc:
            return text_result(f"GNS3 refused: {exc.public_message}", error=True)
        except CopilotError as exc:
            return text_result(exc.public_message, error=True)

    async def _list_projects(self, caller: Caller) -> dict[str, Any]:
        projects = await self._projects(caller)
        rows = [{"name": p.get("name"), "project_id": p.get("project_id"), "status": p.get("status")} for p in projects]
        return {"projects": sorted(rows, key=lambda p: str(p["name"]))}

    async def _check_project(self, caller: Caller, project_id: str) -> dict[str, Any]:
        """The project as GNS3 shows it to this caller (GNS3's 403/404 otherwise)."""
        async with self._client_factory(caller.token()) as client:
            return await client.project(project_id)

    async def _run(
        self, caller: Caller, session: ServerSession, entry: _Entry, name: str, project_id: str, args: dict[str, Any]
    ) -> types.CallToolResult:
        approval_id = args.pop("approval_id", None)
        tools = await asyncio.to_thread(self._tools, caller, project_id)
        # A graded lab's recorded undo is refused to its students here too.
        guards = (self._teaching.guard(caller.user_id, project_id),) if self._teaching is not None else ()
        gate = ToolGate(tools, read_only=caller.read_only, restriction="for a read-only MCP key", errors=TOOL_ERRORS,
                        before=guards)
        if name == "gns3_topology":
            args["project_id"] = project_id
        call = {"name": name, "args": args, "id": ""}
        invalid = gate.invalid_arguments(call)  # before anyone is asked to approve them
        if invalid is not None:
            return text_result(f"Invalid arguments: {validation_summary(invalid)}", error=True)
        approved: Approved | None = None
        if entry.needs_confirmation:
            decision = await self._approval(caller, session, gate, call, project_id, approval_id)
            if isinstance(decision, types.CallToolResult):
                return decision
            approved = decision
        outcome = await gate.run(call, approved=approved)
        if outcome.status == "success":
            return text_result(outcome.result)
        exc = outcome.error
        if isinstance(exc, ValidationError):
            return text_result(f"Invalid arguments: {validation_summary(exc)}", error=True)
        if isinstance(exc, CopilotError) and not isinstance(exc, ToolException):
            raise exc  # not a tool's own failure: said the way MCP says GNS3's and ours (ToolGateway.call)
        # A failure (tools never return one): its text and what it still reports.
        failed = text_result(outcome.reason or outcome.output, error=True)
        reported = failure_outcome(exc) if exc is not None else None
        failed.structuredContent = dict(reported) if reported is not None else None
        return failed

    async def _approval(
        self, caller: Caller, session: ServerSession, gate: ToolGate, call: Mapping[str, Any], project_id: str,
        approval_id: Any,
    ) -> types.CallToolResult | Approved:
        """The approval the call runs under when it may run now (the gate checked it); else the result to send."""
        name, args = str(call["name"]), dict(call["args"])
        grant: ApprovalGrant | None = None
        if approval_id is not None:
            approval = self.approvals.redeem(
                user_id=caller.user_id, credential_id=caller.credential_id, approval_id=str(approval_id),
                tool=name, project_id=project_id, arguments=args,
            )
            if approval.state == "rejected":
                return text_result(REJECTED, error=True)
            if approval.state != "approved":
                return _waiting(approval, again=True)
            grant = ApprovalGrant(approval.approval_id, approval.digest, caller.username, approval.decided_at or 0.0)
        elif _supports_elicitation(session):
            if not await _ask(session, name, args, self._approval_seconds):
                return text_result(REJECTED, error=True)
            grant = ApprovalGrant(f"mcp-elicitation:{uuid.uuid4().hex}", gate.digest([call], project_id=project_id),
                                  caller.username, time.time())
        else:
            approval = self.approvals.request(
                user_id=caller.user_id, credential_id=caller.credential_id, via=caller.audit_session, tool=name,
                project_id=project_id, arguments=args,
            )
            return _waiting(approval, again=False)
        approved = gate.verify(grant, [call], project_id=project_id)
        if approved is None:  # the approval store matched it, so the digest cannot differ; refuse if it ever does
            return text_result("The approval does not match this call; nothing was sent. Ask again.", error=True)
        return approved


def _waiting(approval: Approval, *, again: bool) -> types.CallToolResult:
    route = APPROVAL_ROUTE.format(approval_id=approval.approval_id)
    text = (
        f"{'Still waiting' if again else 'Waiting'} for approval: nothing was sent yet. Ask the user to approve "
        f"approval_id {approval.approval_id} in the GNS3 Copilot panel (or POST {route}), then call "
        f"{approval.tool} again with the same arguments and approval_id."
    )
    data = {"status": "waiting_for_approval", "approval_id": approval.approval_id, "approve_with": f"POST {route}",
            "expires_at": approval.expires_at, "message": text}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structuredContent=data, isError=False
    )


def _supports_elicitation(session: ServerSession) -> bool:
    params = session.client_params
    return params is not None and params.capabilities.elicitation is not None


APPROVE_SCHEMA: types.ElicitRequestedSchema = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Run these commands", "description": "Approve the call"}},
    "required": ["approve"],
}


async def _ask(session: ServerSession, name: str, args: Mapping[str, Any], seconds: float) -> bool:
    """Ask the client's user through MCP elicitation; True only for an explicit approval."""
    commands = "\n".join(f"  {c}" for c in args.get("commands", []))
    # Everything that decides what runs: the driver picks the CLI the lines are typed into.
    driver = f" as a {args['driver']} device" if args.get("driver") else ""
    message = f"{name} wants to configure {args.get('device', '?')}{driver}:\n{commands}\nRun these commands?"
    try:
        async with asyncio.timeout(seconds):  # as long as an approval by id would stay valid
            result = await session.elicit(message, APPROVE_SCHEMA)
    except McpError as exc:  # the client could not ask: nothing runs
        log.info("MCP elicitation for %s failed: %s", name, exc.error.message)
        return False
    except TimeoutError:
        log.info("MCP elicitation for %s got no answer in %.0f s: nothing runs", name, seconds)
        return False
    return result.action == "accept" and (result.content or {}).get("approve") is True
