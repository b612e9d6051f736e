"""Device consoles: telnet client, CLI drivers, command policy, locks, audit, runner.

No LangChain here: ``gns3_copilot.tools.console`` wraps this package as tools.
"""

from .audit import AuditEntry, AuditLog, Who
from .drivers import DRIVERS, IOS, LINUX, VPCS, Driver, DriverSession, UnknownDriverError, cli_known, driver_for
from .locks import DeviceBusyError, DeviceLocks, device_key
from .policy import Decision, Policy, PolicyError, load_policy
from .runner import CommandResult, Device, DeviceResult, run_commands
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
    "DRIVERS",
    "IOS",
    "LINUX",
    "VPCS",
    "Driver",
    "DriverSession",
    "UnknownDriverError",
    "cli_known",
    "driver_for",
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
