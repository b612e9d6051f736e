"""Vendor CLIs that cannot run here, replayed from transcripts of the real CLI and served like GNS3 consoles.

``transcripts/<family>.toml`` records what each CLI prints (prompts, outputs, errors,
pager, config and commit dialogs, login) and where each fact came from;
:class:`~.device.Device` plays a transcript and :class:`~.server.CliSimulator` serves it
on a loopback TCP port. Real CLIs (VPCS, bash, FRR, BIRD) are tested against the real
thing, never against this.
"""

from .device import Device, Session, Transcript, families
from .server import CliSimulator

__all__ = ["CliSimulator", "Device", "Session", "Transcript", "families"]
