"""Which CLI family a GNS3 node runs, from what GNS3 knows, with the evidence and a confidence.

Never a silent guess: :func:`detect_family` returns a :class:`Detection` naming the
family, every piece of evidence it read and how sure it is; when nothing decides,
the family assumed and why is in its ``note`` (a caller shows it, or asks). In order
of strength:

1. ``chosen``: the per-node choice a user allowed to edit the node made (stored by
   the copilot, ``console/choices.py``);
2. ``explicit``: a tag naming the family (``driver:junos``, ``family:junos``), GNS3 3.1's
   ``netmiko_device_type`` (on the node or its template) or ``device_type:``/``platform:``
   tags, read through netmiko's and scrapli's platform names;
3. ``high``: a node type with one CLI (VPCS, IOU and Dynamips run IOS), the image a
   QEMU node boots or a Docker node runs, matched against the GNS3 registry's appliances;
4. ``medium``: the template's name (GNS3 names templates after their appliance);
5. ``low``: the node's name, or nothing at all (a QEMU node is then assumed to be IOS,
   as the console tools always did, and the note says so).

:func:`confirm_by_prompt` is the last step, once connected: the prompt the console
shows either confirms the family or names the one it belongs to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from ..as_data import as_data
from .families import DRIVER_NAMES

Confidence = Literal["confirmed", "chosen", "explicit", "high", "medium", "low"]
_RANK: Mapping[str, int] = {"confirmed": 6, "chosen": 5, "explicit": 4, "high": 3, "medium": 2, "low": 1}

# Every family the console drives (the built-in drivers' and console/families'). Detection names
# them; the caller maps a name to its driver.
KNOWN_FAMILIES = DRIVER_NAMES
_TAG_PREFIXES = ("driver:", "driver=", "copilot-driver:", "family:", "copilot-family:")
_DEVICE_TYPE_TAGS = ("device_type:", "netmiko_device_type:", "platform:")

# netmiko device types (netmiko/ssh_dispatcher.py CLASS_MAPPER, 4.8) and scrapli platform names
# (scrapli.driver.core, scrapli_community) of each family; "_telnet"/"_ssh" suffixes are dropped
# before the lookup. A test checks the netmiko ones against the installed netmiko. GNS3 3.1's own
# telnet drivers: gns3_vpcs_telnet, gns3_huawei_telnet_ce, gns3_ruijie_telnet (3.1's
# docs/gns3-copilot/implemented/multi-vendor-device-support.md).
NETMIKO_TYPES: Mapping[str, str] = {
    "cisco_ios": "ios", "cisco_xe": "ios", "cisco_iosxe": "ios",
    "arista_eos": "eos",
    "juniper": "junos", "juniper_junos": "junos",
    "cisco_xr": "iosxr", "cisco_iosxr": "iosxr",
    "cisco_nxos": "nxos",
    "nokia_srl": "srlinux", "nokia_srlinux": "srlinux",
    "mikrotik_routeros": "routeros",
    "huawei": "vrp", "huawei_vrp": "vrp", "huawei_vrpv8": "vrp", "gns3_huawei_telnet_ce": "vrp",
    "vyos": "vyos", "vyatta_vyos": "vyos", "vyos_vyos": "vyos",
    "fortinet": "fortios", "fortinet_fortios": "fortios",
    "cumulus_linux": "cumulus",
    "linux": "linux",
    "gns3_vpcs_telnet": "vpcs",
}
GNS3_OWN_TYPES = frozenset({"gns3_vpcs_telnet", "gns3_huawei_telnet_ce", "gns3_ruijie_telnet"})
# netmiko types of CLIs the console has no family for (a Ruijie switch is not IOS, whatever it looks like).
UNSUPPORTED_TYPES: Mapping[str, str] = {
    "gns3_ruijie_telnet": "Ruijie RGOS", "ruijie_os": "Ruijie RGOS", "nokia_sros": "Nokia SR OS",
    "cisco_asa": "Cisco ASA", "paloalto_panos": "PAN-OS", "cisco_ftd": "Cisco FTD",
}


@dataclass(frozen=True)
class Hint:
    """A name or image pattern that points to a family, with the appliance it comes from."""

    family: str | None  # None: a known platform the console has no family for
    pattern: re.Pattern[str]
    source: str
    what: str = ""  # for family None: what the platform is


def _hint(family: str | None, pattern: str, source: str, what: str = "") -> Hint:
    return Hint(family, re.compile(pattern, re.IGNORECASE), source, what)


# Image file names, Docker images and appliance names of the GNS3 registry's appliances
# (github.com/GNS3/gns3-registry appliances/*.gns3a, also shipped in gns3-server's
# gns3server/appliances). Unsupported platforms first: a vMX's forwarding plane is Linux,
# not Junos; SR OS is not SR Linux.
HINTS: tuple[Hint, ...] = (
    _hint("linux", r"vfp|vqfx.*pfe|pfe.*vqfx", "juniper-vmx-vfp, juniper-vqfx-pfe (the forwarding plane: Wind River Linux)"),
    _hint("linux", r"junos.?space|\bspace-\d", "juniper-junos-space (a CentOS appliance, not the Junos CLI)"),
    _hint(None, r"\bsros\b|sros-|nokia.?vsim|timos", "nokia-vsim", "Nokia SR OS"),
    _hint(None, r"winbox", "mikrotik-winbox (the Winbox GUI in a container, not a RouterOS console)",
          "MikroTik's Winbox GUI"),
    _hint(None, r"asav|\basa\d|cisco.?asa", "cisco-asav, cisco-asa", "Cisco ASA"),
    _hint(None, r"forti(?:manager|analyzer|web|mail|proxy|sandbox|siem|adc|authenticator|cache|recorder)|"
                r"\bf(?:mg|az|wb|ml|sa|ad|ac|pr|ch|rec|sm)_",
          "fortimanager, fortianalyzer, fortiweb ... (not FortiOS)", "a Fortinet appliance other than FortiGate"),
    _hint("eos", r"veos|ceos|aboot-veos|arista", "arista-veos (vEOS-lab, Aboot-veos), arista-ceos (ceosimage)"),
    _hint("junos", r"vjunos|junos|vsrx|vmx|vcp|jinstall|vqfx|\bvrr\b|juniper",
          "juniper-vJunos-router, juniper-vmx-vcp, juniper-vsrx, juniper-vqfx-re, juniper-vrr"),
    _hint("iosxr", r"xrv|ios.?xr", "cisco-iosxrv, cisco-iosxrv9k (iosxrv-k9-demo, xrv9k-fullk9)"),
    _hint("nxos", r"nexus9|nxos|nx-os|titanium", "cisco-nxosv (titanium), cisco-nxosv9k (nexus9300v, nexus9500v)"),
    _hint("srlinux", r"srlinux|sr.linux", "Nokia's SR Linux container image (ghcr.io/nokia/srlinux)"),
    _hint("routeros", r"\bchr\b|chr-\d|mikrotik|routeros", "mikrotik-chr and the RouterBOARD appliances (chr-7.x.img)"),
    _hint("vrp", r"ne40e|ce12800|ce6800|ar1k|huaweiar|usg6k|huawei|\bvrp\b",
          "huawei-ne40e, huawei-ce12800, huawei-ar1kv, huawei-usg6kv"),
    _hint("vyos", r"vyos|vyatta", "vyos (vyos-1.x-kvm-amd64.qcow2)"),
    _hint("fortios", r"fgt_vm|fortigate|fortios", "fortigate (FGT_VM64_KVM)"),
    _hint("cumulus", r"cumulus", "cumulus-vx (cumulus-linux-5.x-vx-amd64-qemu.qcow2)"),
    _hint("frr", r"\bfrr\b|frr-\d|frrouting", "frr (frr-8.x.qcow2), frr-docker (frrouting/frr)"),
    _hint("ios", r"vios|iosv|csr1000v|c8000v|cat9k|ios.?xe|i86bi|c\d{4}-", "cisco-iosv, cisco-iosvl2, cisco-csr1000v, "
          "cisco-c8000v, cisco-cat9k, IOU (i86bi), Dynamips (c7200-...)"),
    _hint("linux", r"debian|ubuntu|alpine|centos|fedora|kali|openwrt|linux|busybox", "debian, ubuntu, alpine, openwrt ..."),
)
# Where a node (and its template) names the software it runs, per node type.
_IMAGE_FIELDS = ("hda_disk_image", "hdb_disk_image", "hdc_disk_image", "hdd_disk_image", "cdrom_image", "image", "path")


@dataclass(frozen=True)
class Evidence:
    source: str  # where it was read: "tag", "netmiko_device_type", "node type", "image", "template name" ...
    value: str
    family: str | None
    confidence: Confidence


@dataclass(frozen=True)
class Detection:
    """The family a node is taken to run, why, and how sure that is."""

    family: str | None
    confidence: Confidence | None
    evidence: tuple[Evidence, ...]
    note: str = ""

    @property
    def assumed(self) -> bool:
        """Whether the family is a fallback or contradicted: the user should be told (or asked)."""
        return self.family is None or self.confidence == "low" or self.conflicts

    @property
    def conflicts(self) -> bool:
        """Whether strong evidence points to another family than the one detected."""
        return any(e.family != self.family and _RANK[e.confidence] >= _RANK["high"] for e in self.evidence)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "assumed": self.assumed}


def _tags(*records: Mapping[str, Any] | None) -> list[str]:
    return [str(tag).strip() for record in records if record for tag in record.get("tags") or ()]


def _device_type(value: str) -> str:
    """A netmiko device type or scrapli platform without its transport (``cisco_ios_telnet``: ``cisco_ios``)."""
    name = value.strip().casefold()
    if name in NETMIKO_TYPES or name in UNSUPPORTED_TYPES:
        return name
    for suffix in ("_telnet", "_ssh", "_serial"):
        name = name.removesuffix(suffix)
    return name


def _explicit(node: Mapping[str, Any], template: Mapping[str, Any] | None) -> list[Evidence]:
    found: list[Evidence] = []
    for tag in _tags(node, template):
        low = tag.casefold()
        for prefix in _TAG_PREFIXES:
            if low.startswith(prefix) and low[len(prefix):].strip() in KNOWN_FAMILIES:
                found.append(Evidence("tag", tag, low[len(prefix):].strip(), "explicit"))
        if low in KNOWN_FAMILIES:
            found.append(Evidence("tag", tag, low, "explicit"))
        for prefix in _DEVICE_TYPE_TAGS:
            if low.startswith(prefix):
                found.append(_device_type_evidence(f"tag {prefix.rstrip(':')}", tag[len(prefix):]))
    for record, where in ((node, "node"), (template, "template")):
        device_type = (record or {}).get("netmiko_device_type")
        if device_type:
            found.append(_device_type_evidence(f"netmiko_device_type of the {where}", str(device_type)))
    return found


def _device_type_evidence(source: str, value: str) -> Evidence:
    return Evidence(source, value, NETMIKO_TYPES.get(_device_type(value)), "explicit")


def _names(record: Mapping[str, Any] | None) -> list[str]:
    """The image files and Docker image a node or template names."""
    if not record:
        return []
    values = [record.get(f) for f in _IMAGE_FIELDS] + [(record.get("properties") or {}).get(f) for f in _IMAGE_FIELDS]
    return [str(v) for v in values if v]


def _matching(text: str) -> Hint | None:
    return next((hint for hint in HINTS if hint.pattern.search(text)), None)


def _hinted(source: str, values: Iterable[str], confidence: Confidence) -> list[Evidence]:
    found = []
    for value in values:
        hint = _matching(value)
        if hint is not None:
            found.append(Evidence(source, value, hint.family, confidence))
    return found


def _unsupported(evidence: Evidence) -> str:
    """What the platform evidence with no family names is, as far as we know."""
    known = UNSUPPORTED_TYPES.get(_device_type(evidence.value))
    if known is not None:
        return known
    hint = _matching(evidence.value)
    return hint.what if hint is not None and hint.family is None else "a CLI"


def detect_family(
    node: Mapping[str, Any], template: Mapping[str, Any] | None = None, choice: str | None = None
) -> Detection:
    """The family of GNS3 ``node`` (its JSON as GNS3 returns it), from its template's JSON when
    known and the per-node ``choice`` stored by the copilot."""
    evidence: list[Evidence] = []
    if choice:
        evidence.append(Evidence("choice", choice, choice, "chosen"))
    evidence += _explicit(node, template)
    node_type = str(node.get("node_type") or "")
    if node_type == "vpcs":
        evidence.append(Evidence("node type", node_type, "vpcs", "explicit"))
    elif node_type in ("iou", "dynamips"):
        evidence.append(Evidence("node type", node_type, "ios", "high"))
    images = _names(node) + [v for v in _names(template) if v not in _names(node)]
    evidence += _hinted("docker image" if node_type == "docker" else "image", images, "high")
    if node_type == "docker" and not any(e.source == "docker image" for e in evidence):
        evidence.append(Evidence("node type", node_type, "linux", "high"))
    if template:
        evidence += _hinted("template name", [str(template.get("name") or "")], "medium")
    evidence += _hinted("node name", [str(node.get("name") or "")], "low")
    return _decide(node, evidence)


def _decide(node: Mapping[str, Any], evidence: list[Evidence]) -> Detection:
    ranked = sorted(evidence, key=lambda e: -_RANK[e.confidence])
    if ranked:
        best = ranked[0]
        if best.family is None:
            return Detection(None, best.confidence, tuple(ranked),
                             f"{as_data(node.get('name'))}'s {best.source} {as_data(best.value)} names {_unsupported(best)}, which has "
                             f"no console family: choose one ({', '.join(KNOWN_FAMILIES)}) if its CLI is one of them")
        top = [e for e in ranked if e.confidence == best.confidence]
        families = {e.family for e in top}
        if len(families) > 1:
            named = ", ".join(sorted(str(f) for f in families))
            return Detection(best.family, best.confidence, tuple(ranked),
                             f"{best.source} points to {best.family} but other {best.confidence} evidence to {named}; "
                             f"assumed {best.family}: choose the family to be sure")
        detection = Detection(best.family, best.confidence, tuple(ranked))
        if detection.conflicts:
            others = sorted({str(e.family) for e in ranked if e.family != best.family and _RANK[e.confidence] >= 3})
            return Detection(best.family, best.confidence, tuple(ranked),
                             f"{best.family} ({best.source}), although other evidence points to {', '.join(others)}")
        if best.confidence == "low":
            return Detection(best.family, "low", tuple(ranked),
                             f"assumed {best.family} from the node's name {as_data(node.get('name'))} only")
        return detection
    if str(node.get("node_type")) == "qemu":
        return Detection("ios", "low", (Evidence("node type", "qemu", "ios", "low"),),
                         f"assumed ios for {as_data(node.get('name'))}: nothing GNS3 knows of this QEMU node (image, template, "
                         "tags) names its CLI; choose the family if it is not Cisco IOS")
    return Detection(None, None, (), f"nothing says which CLI {as_data(node.get('name'))} (a {as_data(node.get('node_type'))} node) runs")


class PromptReader(Protocol):
    """What telling families apart by their prompt needs (a family, or a driver built from one)."""

    @property
    def title(self) -> str: ...

    def prompt_in(self, output: str) -> str | None: ...


def confirm_by_prompt(detection: Detection, output: str, families: Mapping[str, PromptReader]) -> Detection:
    """The detection once the console's ``output`` (ending in a prompt) has been read.

    The detected family's prompt confirms it (a prompt several families share, such as
    ``R1#``, confirms little: it is only consistent with it); the one family whose prompt
    it is (the longest match: SR Linux's two-line prompt ends in ``A:srl#``) replaces it
    and says so, unless a user chose the family. A prompt of no family, or one the
    IOS-style CLIs share, leaves it as it was.
    """
    prompts = {name: seen for name, f in families.items() if (seen := f.prompt_in(output)) is not None}
    longest = max((len(p) for p in prompts.values()), default=0)
    best = [name for name, p in prompts.items() if len(p) == longest]
    shown = _last_line(output)
    if detection.family in prompts and detection.family in best:
        evidence = (Evidence("prompt", shown, detection.family, "confirmed"), *detection.evidence)
        return Detection(detection.family, "confirmed", evidence)
    if len(best) == 1:
        other = families[best[0]]
        if detection.confidence == "chosen":  # the user's call: kept, and the mismatch said
            return Detection(detection.family, detection.confidence, detection.evidence,
                             f"the console's prompt {as_data(shown)} looks like {other.title}'s, not {detection.family}'s")
        evidence = (Evidence("prompt", shown, best[0], "confirmed"), *detection.evidence)
        return Detection(best[0], "confirmed", evidence,
                         f"the console's prompt {as_data(shown)} is {other.title}'s, not {detection.family}'s")
    return detection


def _last_line(output: str) -> str:
    lines = output.replace("\r", "").rstrip().splitlines()
    return lines[-1].strip() if lines else ""
