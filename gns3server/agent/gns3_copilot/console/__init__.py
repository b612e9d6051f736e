"""Device consoles: telnet client, terminal filter, CLI drivers and sessions, policy, locks, audit, runner.

No LangChain here: ``gns3_copilot.tools.console`` wraps this package as tools.
"""

from .audit import AuditEntry, AuditLog, Who
from .credentials import Credentials, CredentialStore
from .drivers import (
    BIRD,
    DRIVERS,
    FRR,
    IOS,
    LINUX,
    VPCS,
    Driver,
    Pager,
    Step,
    StructuredOutput,
    UnknownDriverError,
)
from .locks import DeviceBusyError, DeviceLocks, device_key
from .policy import Decision, Policy, PolicyError, load_policy
from .runner import CommandResult, Device, DeviceResult, run_commands
from .session import ConsoleBusyError, ConsoleLoginError, CredentialsNeededError, DriverSession
from .telnet import (
    TRUNCATED_MARKER,
    ConsoleClosed,
    ConsoleConnectError,
    ConsoleError,
    ConsoleTimeout,
    TelnetConsole,
)

__all__ = [
    "AuditEntry",
    "AuditLog",
    "Who",
    "Credentials",
    "CredentialStore",
    "BIRD",
    "DRIVERS",
    "FRR",
    "IOS",
    "LINUX",
    "VPCS",
    "Driver",
    "Pager",
    "Step",
    "StructuredOutput",
    "ConsoleBusyError",
    "ConsoleLoginError",
    "CredentialsNeededError",
    "DriverSession",
    "UnknownDriverError",
    "DeviceBusyError",
    "DeviceLocks",
    "device_key",
    "Decision",
    "Policy",
    "PolicyError",
    "load_policy",
    "CommandResult",
    "Device",
    "DeviceResult",
    "run_commands",
    "TRUNCATED_MARKER",
    "ConsoleClosed",
    "ConsoleConnectError",
    "ConsoleError",
    "ConsoleTimeout",
    "TelnetConsole",
]
