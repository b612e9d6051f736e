"""The copilot's tools for one run: bound to a project, a user and a session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from ..changes.store import ChangeStore
from ..changes.transaction import DEFAULT_VERIFY_SECONDS
from ..console import AuditLog, CredentialStore, DeviceLocks, Policy
from ..console.choices import FamilyChoices
from ..console.registry import Drivers
from .console import ConfigCommandsTool, ShowCommandsTool
from .links import UpdateLinkTool
from .nodes import ClientFactory, CreateLinkTool, CreateNodeTool, ListTemplatesTool, NodeActionTool
from .permissions import Authorize
from .topology import GNS3TopologyTool
from .verify import VerifyTool


@dataclass(frozen=True)
class RunContext:
    """Who a run acts for: GNS3 clients with the user's token, the project, the session."""

    client_factory: ClientFactory
    project_id: str
    username: str
    session_id: str
    user_id: str = ""
    record_undo: bool = False
    """A fault-injection run: lab-changing tools return how to undo what they change."""


@dataclass(frozen=True)
class ConsoleServices:
    """Server-wide parts of the device console tools: command policy, device locks, audit,
    GNS3's permission check (``permissions(user_id)``: an :data:`Authorize` for that user),
    the devices' console credentials (typed into a console that asks for a login), where
    changes and configuration backups are kept, and how long a change's checks may wait."""

    policy: Policy
    locks: DeviceLocks
    audit: AuditLog
    permissions: Callable[[str], Authorize]
    credentials: CredentialStore | None = None
    changes: ChangeStore | None = None
    verify_seconds: float = DEFAULT_VERIFY_SECONDS
    choices: FamilyChoices | None = None  # the per-node CLI families users chose
    drivers: Drivers = field(default_factory=Drivers)  # the built-in ones, unless loaded at start-up


def build_tools(context: RunContext, console: ConsoleServices | None = None) -> list[BaseTool]:
    """Every tool the agent knows; the mode decides which it may use (read-only ones in teaching).

    Without ``console`` the device console tools are left out. They ask GNS3's
    permission check for the run's user; the other tools act through GNS3's REST
    API with the user's token, so GNS3 checks them itself.
    """
    factory, project_id = context.client_factory, context.project_id
    # GNS3's refusals of these tools are audited with the console's log when there is one.
    audit, user, session_id = (console.audit if console else None), context.username, context.session_id
    tools: list[BaseTool] = [
        GNS3TopologyTool(client_factory=factory, project_id=project_id, metadata={"read_only": True},
                         drivers=console.drivers if console else None, choices=console.choices if console else None),
        ListTemplatesTool(client_factory=factory, project_id=project_id, audit=audit, user=user, session_id=session_id),
        NodeActionTool(client_factory=factory, project_id=project_id, audit=audit, user=user, session_id=session_id),
        CreateNodeTool(client_factory=factory, project_id=project_id, audit=audit, user=user, session_id=session_id),
        CreateLinkTool(client_factory=factory, project_id=project_id, audit=audit, user=user, session_id=session_id),
        UpdateLinkTool(client_factory=factory, project_id=project_id, audit=audit, user=user, session_id=session_id),
    ]
    if console is not None:
        authorize = console.permissions(context.user_id)
        tools += [
            ShowCommandsTool(
                client_factory=factory, project_id=project_id, policy=console.policy, locks=console.locks,
                audit=console.audit, authorize=authorize, user=user, session_id=session_id,
                credentials=console.credentials, drivers=console.drivers, choices=console.choices,
            ),
            ConfigCommandsTool(
                client_factory=factory, project_id=project_id, policy=console.policy, locks=console.locks,
                audit=console.audit, authorize=authorize, user=user, session_id=session_id,
                credentials=console.credentials, record_undo=context.record_undo, changes=console.changes,
                verify_seconds=console.verify_seconds, drivers=console.drivers, choices=console.choices,
            ),
            VerifyTool(
                client_factory=factory, project_id=project_id, policy=console.policy, locks=console.locks,
                audit=console.audit, authorize=authorize, user=user, session_id=session_id,
                credentials=console.credentials, drivers=console.drivers, choices=console.choices,
            ),
        ]
    return tools
