"""What a tool call read from devices: the reads an evidence record is made of.

Any tool's outcome is looked at, whatever the tool, so that tools written later
(checks, verified changes) give evidence by returning what they read in one of
the shapes below, without this module knowing them:

* a **console batch** (``console.runner.DeviceResult.as_dict()``): ``{"device",
  "status", "results": [{"command", "status", "output", "data"?}], "error"?}``,
  anywhere in the result (``gns3_show_commands`` returns ``{"devices": [...]}``,
  ``gns3_config_commands`` one batch; a failed call's outcome is looked at too);
  each command the device answered is one read, and a batch that could not reach
  the console (``failed``: stopped, unreachable) one read of that failure;
* an explicit list under ``"reads"``: ``[{"device", "command", "output", "status"?}]``
  (a check that read values and parsed them says so here);
* a **GNS3 topology** (``gns3_topology``'s result: ``{"nodes": [...], "links": [...]}``):
  one read per node (its type, status, console and links, as GNS3 says).

A call refused or rejected before it ran read nothing. What is kept never holds
a secret: commands and outputs pass :func:`..redaction.scrub` (the keys of the
runs in progress, key-shaped strings, ``password=...`` pairs), which also keeps
them out of logs and stored errors, and the secrets of device configurations
(``enable secret 5 ...``, ``username u password ...``, ``neighbor X password
...``, SNMP communities, key strings) are masked. Outputs are kept up to
:data:`OUTPUT_MAX` characters (the head, with a marker), which is more than the
model was shown of any one command (``console.telnet.DEFAULT_MAX_OUTPUT`` is per
batch).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..as_data import as_data
from ..redaction import MASK, scrub
from ..tools.gate import ToolOutcome

__all__ = ["OUTPUT_MAX", "DeviceRead", "Evidence", "node_read", "reads_of", "without_secrets"]

Source = Literal["console", "gns3"]
OUTPUT_MAX = 64 * 1024
_CUT = "\n[... cut: the rest of this output is not kept as evidence ...]"
_ANSWERED = ("ok", "error", "timeout")  # the device printed something for the command
_MAX_DEPTH = 6
# A configuration's secrets (IOS, FRR, BIRD, Juniper's set form): the keyword and its
# encryption type stay (they say what is configured), the value is masked.
_CONFIG_SECRET = re.compile(
    r"(?i)(\b(?:password|secret|key-string|authentication-key|community|pre-shared-key|md5|psk|passphrase)"
    r"(?:\s+[0-9])?\s+)(?!\[REDACTED\])(\"[^\"\n]*\"|\S+)"
)


@dataclass(frozen=True)
class DeviceRead:
    """One output of one device, as a tool read it (not yet stored)."""

    device: str
    command: str
    output: str
    status: str
    """``ok``; ``error`` (the CLI answered with an error line); ``failed`` (its console could not be used)."""
    source: Source
    """``console``: the device's own CLI said it; ``gns3``: GNS3 said it of the node."""
    tool: str
    tool_call_id: str = ""


@dataclass(frozen=True, kw_only=True)
class Evidence(DeviceRead):
    """A stored read: its id in the session (``E3``), the turn it belongs to, when it was read."""

    evidence_id: str
    session_id: str
    turn_id: str
    at: float

    def public(self, *, with_output: bool = False) -> dict[str, Any]:
        """As the API and the ``evidence`` event show it."""
        shown: dict[str, Any] = {
            "id": self.evidence_id, "device": self.device, "device_label": as_data(self.device),
            "command": self.command, "status": self.status,
            "source": self.source, "tool": self.tool, "tool_call_id": self.tool_call_id, "at": self.at,
        }
        if with_output:
            shown["output"] = self.output
        return shown


def without_secrets(text: str) -> str:
    """``text`` as evidence may keep it: no key, password or configured secret in it."""
    return scrub(_CONFIG_SECRET.sub(lambda m: m.group(1) + MASK, text))


def _kept(text: str) -> str:
    text = without_secrets(text)
    return text if len(text) <= OUTPUT_MAX else text[:OUTPUT_MAX] + _CUT


def _batch_reads(batch: Mapping[str, Any], tool: str, call_id: str) -> Iterator[DeviceRead]:
    device = str(batch.get("device") or "")
    if batch.get("status") == "failed" and batch.get("error"):
        yield DeviceRead(device, "(console)", _kept(str(batch["error"])), "failed", "console", tool, call_id)
    for result in batch.get("results") or ():
        if not isinstance(result, Mapping) or result.get("status") not in _ANSWERED:
            continue
        output = str(result.get("output") or "")
        if not output and result.get("data") is not None:
            output = json.dumps(result["data"], ensure_ascii=False, indent=1, default=str)
        status = "ok" if result.get("status") == "ok" else "error"
        command = without_secrets(str(result.get("command") or ""))
        yield DeviceRead(device, command, _kept(output), status, "console", tool, call_id)


def _is_batch(item: Mapping[str, Any]) -> bool:
    return isinstance(item.get("device"), str) and isinstance(item.get("results"), list)


def _is_topology(item: Mapping[str, Any]) -> bool:
    nodes = item.get("nodes")
    return isinstance(nodes, list) and "links" in item and all(isinstance(n, Mapping) and "name" in n for n in nodes)


def node_read(node: Mapping[str, Any], tool: str, call_id: str = "") -> DeviceRead:
    """A node as GNS3 describes it (``Topology.to_dict()``'s node), as one read of that node."""
    console = node.get("console") or {}
    parts = [f"{as_data(node.get('name'))}: {node.get('node_type') or 'node'}, status {node.get('status') or 'unknown'}"]
    if isinstance(console, Mapping) and console.get("port"):
        parts.append(f"console {console.get('type') or '?'} {console.get('host') or ''}:{console.get('port')}")
    lines = ["; ".join(parts)]
    for port in node.get("ports") or ():
        peer = port.get("linked_to")
        name = as_data(port.get("name"))
        names = f"{name} ({as_data(port.get('short_name'))})" if port.get("short_name") else name
        lines.append(f"port {names}: " + (f"linked to {peer}" if peer else "not linked"))
    return DeviceRead(str(node.get("name")), "GNS3 node status and links", "\n".join(lines), "ok", "gns3", tool, call_id)


def _walk(item: Any, tool: str, call_id: str, depth: int = 0) -> Iterator[DeviceRead]:
    if depth > _MAX_DEPTH:
        return
    if isinstance(item, Mapping):
        if _is_batch(item):
            yield from _batch_reads(item, tool, call_id)
            return
        if _is_topology(item):
            for node in item["nodes"]:
                yield node_read(node, tool, call_id)
            return
        explicit = item.get("reads")
        if isinstance(explicit, Sequence) and not isinstance(explicit, str):
            for read in explicit:
                if isinstance(read, Mapping) and read.get("device") and read.get("command") is not None:
                    yield DeviceRead(str(read["device"]), without_secrets(str(read["command"])), _kept(str(read.get("output") or "")),
                                     str(read.get("status") or "ok"), "console", tool, call_id)
        for key, value in item.items():
            if key != "reads":
                yield from _walk(value, tool, call_id, depth + 1)
    elif isinstance(item, Sequence) and not isinstance(item, (str, bytes)):
        for value in item:
            yield from _walk(value, tool, call_id, depth + 1)


def reads_of(outcome: ToolOutcome, failure: Mapping[str, Any] | None = None) -> list[DeviceRead]:
    """What the call read from devices; ``failure``: what a failed call still reports (its outcome)."""
    if outcome.status == "rejected":
        return []
    source = outcome.result if outcome.status == "success" else failure
    return list(_walk(source, outcome.name, outcome.call_id)) if source is not None else []
