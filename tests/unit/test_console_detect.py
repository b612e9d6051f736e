"""Which family a node is: GNS3's node and template JSON, the registry's appliances, 3.1's fields, the prompt."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.console.detect import (
    GNS3_OWN_TYPES,
    KNOWN_FAMILIES,
    NETMIKO_TYPES,
    UNSUPPORTED_TYPES,
    confirm_by_prompt,
    detect_family,
)
from gns3server.agent.gns3_copilot.console.families import FAMILY_NAMES, load_families

APPLIANCES = Path(str(resources.files("gns3server") / "appliances"))
# What each appliance of the GNS3 registry (as shipped with the installed gns3-server) runs on its console.
EXPECTED = {
    "arista-veos.gns3a": "eos", "arista-ceos.gns3a": "eos",
    "juniper-vJunos-router.gns3a": "junos", "juniper-vmx-vcp.gns3a": "junos", "juniper-vmx-legacy.gns3a": "junos",
    "juniper-vsrx.gns3a": "junos", "juniper-vqfx-re.gns3a": "junos", "juniper-vrr.gns3a": "junos",
    "juniper-vmx-vfp.gns3a": "linux", "juniper-vqfx-pfe.gns3a": "linux", "juniper-junos-space.gns3a": "linux",
    "cisco-iosxrv.gns3a": "iosxr", "cisco-iosxrv9k.gns3a": "iosxr",
    "cisco-nxosv.gns3a": "nxos", "cisco-nxosv9k.gns3a": "nxos",
    **{f"mikrotik-{model}.gns3a": "routeros" for model in (
        "chr", "ccr1036-8g-2s+", "ccr1072-1g-8s+", "crs328-24p-4s+", "crs328-4c-20s-4s+", "rb1100ahx4-dude-edition",
        "rb2011uias", "rb3011uias", "rb4011igs+", "rb450g", "rb450gx4")},
    "huawei-ne40e.gns3a": "vrp", "huawei-ce12800.gns3a": "vrp", "huawei-ar1kv.gns3a": "vrp", "huawei-usg6kv.gns3a": "vrp",
    "vyos.gns3a": "vyos", "brocade-vrouter.gns3a": "vyos",
    "fortigate.gns3a": "fortios",
    "cumulus-vx.gns3a": "cumulus",
    "frr.gns3a": "frr",
    "cisco-iosv.gns3a": "ios", "cisco-iosvl2.gns3a": "ios", "cisco-csr1000v.gns3a": "ios", "cisco-7200.gns3a": "ios",
    "cisco-iou-l3.gns3a": "ios",
    "debian.gns3a": "linux", "alpine-linux.gns3a": "linux", "openwrt.gns3a": "linux", "network_automation.gns3a": "linux",
    # Known platforms without a console family: never taken for one that looks alike.
    "nokia-vsim.gns3a": None, "cisco-asav.gns3a": None, "fortimanager.gns3a": None, "fortiweb.gns3a": None,
    "mikrotik-winbox.gns3a": None,
}
VENDOR_FAMILIES = set(FAMILY_NAMES) - {"cumulus"}  # families an unrelated appliance must never be taken for


def appliance_shapes(path: Path) -> tuple[dict, dict]:
    """The template and node JSON GNS3 makes from an appliance (its first version's images)."""
    data = json.loads(path.read_text("utf-8"))
    kind = next(k for k in ("qemu", "docker", "iou", "dynamips") if k in data)
    version = (data.get("versions") or [{}])[0]
    images = dict(version.get("images", {}))
    if kind == "docker":
        images = {"image": data["docker"]["image"]}
    if kind == "dynamips":
        images["platform"] = data["dynamips"]["platform"]
    template = {"template_id": "t-1", "name": f"{data['name']} {version.get('name', '')}".strip(), "template_type": kind,
                "category": data.get("category"), **images}
    node = {"node_id": "n-1", "name": f"{data['name'].replace(' ', '')}-1", "node_type": kind, "template_id": "t-1",
            "console_type": "telnet", "properties": images}
    return template, node


def test_the_bundled_appliances_are_read():
    assert len(list(APPLIANCES.glob("*.gns3a"))) > 100
    assert set(EXPECTED) <= {p.name for p in APPLIANCES.glob("*.gns3a")}


@pytest.mark.parametrize(("appliance", "family"), sorted(EXPECTED.items()))
def test_each_registry_appliance_is_its_family(appliance, family):
    template, node = appliance_shapes(APPLIANCES / appliance)
    detection = detect_family(node, template)
    assert detection.family == family, (detection.family, detection.evidence)
    assert detection.confidence in ("explicit", "high"), detection
    if family is None:
        assert "no console family" in detection.note and detection.assumed


def test_no_other_appliance_is_taken_for_a_vendor_family():
    """An appliance the table does not name (a new one in a newer gns3-server) is never silently a vendor's."""
    for path in sorted(APPLIANCES.glob("*.gns3a")):
        if path.name in EXPECTED:
            continue
        template, node = appliance_shapes(path)
        detection = detect_family(node, template)
        assert detection.family not in VENDOR_FAMILIES or detection.confidence == "low", (path.name, detection)


def test_the_image_alone_decides_without_a_template():
    node = {"name": "R1", "node_type": "qemu", "properties": {"hda_disk_image": "vJunos-router-23.4R2-S2.1.qcow2"}}
    detection = detect_family(node)
    assert (detection.family, detection.confidence, detection.assumed) == ("junos", "high", False)
    assert detection.evidence[0].source == "image"


def test_a_qemu_node_nobody_describes_is_assumed_ios_and_says_so():
    detection = detect_family({"name": "R7", "node_type": "qemu", "properties": {"hda_disk_image": "disk.qcow2"}})
    assert (detection.family, detection.confidence, detection.assumed) == ("ios", "low", True)
    assert "assumed ios" in detection.note and "choose the family" in detection.note


def test_a_node_type_with_no_cli_has_no_family():
    detection = detect_family({"name": "SW1", "node_type": "ethernet_switch"})
    assert detection.family is None and detection.assumed and "SW1" in detection.note


@pytest.mark.parametrize(("node", "template", "family", "source"), [
    # GNS3 3.1: netmiko_device_type on the node, or on its template; device_type:/platform: tags.
    ({"name": "R1", "node_type": "qemu", "netmiko_device_type": "juniper_junos"}, None, "junos", "netmiko_device_type of the node"),
    ({"name": "R1", "node_type": "qemu", "template_id": "t"}, {"name": "x", "netmiko_device_type": "arista_eos"}, "eos",
     "netmiko_device_type of the template"),
    ({"name": "R1", "node_type": "qemu", "tags": ["device_type:cisco_ios_telnet", "platform:cisco_ios"]}, None, "ios",
     "tag device_type"),
    ({"name": "R1", "node_type": "qemu", "tags": ["device_type:gns3_huawei_telnet_ce"]}, None, "vrp", "tag device_type"),
    ({"name": "PC1", "node_type": "vpcs", "tags": ["device_type:gns3_vpcs_telnet"]}, None, "vpcs", "tag device_type"),
    ({"name": "R1", "node_type": "qemu", "tags": ["platform:nokia_srlinux"]}, None, "srlinux", "tag platform"),
    # Our own tags, on the node or the template.
    ({"name": "R1", "node_type": "qemu", "tags": ["driver:vyos"]}, None, "vyos", "tag"),
    ({"name": "R1", "node_type": "qemu"}, {"name": "x", "tags": ["family:routeros"]}, "routeros", "tag"),
])
def test_explicit_evidence(node, template, family, source):
    detection = detect_family(node, template)
    assert (detection.family, detection.confidence) == (family, "explicit")
    assert detection.evidence[0].source == source


def test_evidence_ranks_and_conflicts_are_said():
    node = {"name": "vEOS-1", "node_type": "qemu", "tags": ["driver:junos"],
            "properties": {"hdb_disk_image": "vEOS64-lab-4.33.2F.qcow2"}}
    detection = detect_family(node, {"name": "Arista vEOS 4.33.2F"})
    assert detection.family == "junos" and detection.conflicts and detection.assumed
    assert "eos" in detection.note
    assert [e.confidence for e in detection.evidence] == ["explicit", "high", "medium", "low"]
    chosen = detect_family(node, None, choice="eos")
    assert (chosen.family, chosen.confidence) == ("eos", "chosen") and chosen.conflicts  # the tag still disagrees


def test_weak_evidence_only_is_assumed():
    detection = detect_family({"name": "vyos-edge", "node_type": "qemu"})
    assert (detection.family, detection.confidence, detection.assumed) == ("vyos", "low", True)
    assert "node's name" in detection.note
    template_only = detect_family({"name": "R1", "node_type": "qemu"}, {"name": "MikroTik CHR 7.16"})
    assert (template_only.family, template_only.confidence, template_only.assumed) == ("routeros", "medium", False)


def test_a_platform_without_a_family_is_named():
    detection = detect_family({"name": "FW1", "node_type": "qemu", "netmiko_device_type": "cisco_asa"})
    assert detection.family is None and "Cisco ASA" in detection.note
    detection = detect_family({"name": "SW9", "node_type": "qemu", "tags": ["device_type:hp_comware_telnet"]})
    assert detection.family is None and "no console family" in detection.note


def test_a_docker_node_is_its_images_family_else_a_shell():
    docker = {"name": "srl1", "node_type": "docker", "properties": {"image": "ghcr.io/nokia/srlinux:24.10.1"}}
    assert detect_family(docker).family == "srlinux"
    plain = {"name": "h1", "node_type": "docker", "properties": {"image": "gns3/webterm:latest"}}
    detection = detect_family(plain)
    assert (detection.family, detection.confidence, detection.evidence[-1].source) == ("linux", "high", "node type")


def test_our_netmiko_types_are_netmikos():
    """The table names netmiko 4.8's device types (GNS3 3.1's own drivers aside): drift is caught here."""
    from netmiko.ssh_dispatcher import CLASS_MAPPER

    netmiko_names = {name for name in NETMIKO_TYPES if not name.startswith(("gns3_", "nokia_srlinux", "vyos_vyos",
                                                                             "fortinet_fortios", "cisco_iosxe",
                                                                             "cisco_iosxr"))}
    assert netmiko_names <= set(CLASS_MAPPER), netmiko_names - set(CLASS_MAPPER)
    assert {name for name in UNSUPPORTED_TYPES if name not in GNS3_OWN_TYPES} <= set(CLASS_MAPPER)
    assert set(NETMIKO_TYPES.values()) <= set(KNOWN_FAMILIES)
    # Every netmiko telnet type of a family we know resolves (GNS3 consoles are telnet).
    for name in CLASS_MAPPER:
        base = name.removesuffix("_telnet")
        if name.endswith("_telnet") and base in NETMIKO_TYPES:
            assert detect_family({"name": "x", "node_type": "qemu", "netmiko_device_type": name}).family == NETMIKO_TYPES[base]


def test_scrapli_platform_names_resolve_too():
    from gns3server.agent.gns3_copilot.console.families import SPECS

    for name, spec in SPECS.items():
        node = {"name": "x", "node_type": "qemu", "tags": [f"platform:{spec.library.platform}"]}
        assert detect_family(node).family == name


FAMILIES = load_families()


def test_the_prompt_confirms_or_corrects_the_detection():
    assumed = detect_family({"name": "R7", "node_type": "qemu"})  # ios, low
    corrected = confirm_by_prompt(assumed, "Info: The max number of VTY users is 5.\r\n<R7>", FAMILIES)  # VRP's
    assert (corrected.family, corrected.confidence) == ("vrp", "confirmed")
    assert "Huawei VRP" in corrected.note and corrected.evidence[0].source == "prompt"
    assert confirm_by_prompt(assumed, "\r\n--{ running }--[  ]--\r\nA:R7#", FAMILIES).family == "srlinux"
    assert confirm_by_prompt(assumed, "\r\n[admin@R7] > ", FAMILIES).family == "routeros"
    # "root@R7> " is Junos's and EOS's alike: two families, no correction.
    assert confirm_by_prompt(assumed, "\r\nroot@R7> ", FAMILIES) == assumed
    eos = detect_family({"name": "leaf1", "node_type": "qemu", "properties": {"hda_disk_image": "vEOS64-lab.qcow2"}})
    confirmed = confirm_by_prompt(eos, "\r\nleaf1#", FAMILIES)
    assert (confirmed.family, confirmed.confidence, confirmed.note) == ("eos", "confirmed", "")
    # An IOS-style prompt fits several families: it proves nothing against the image.
    assert confirm_by_prompt(assumed, "\r\nR7#", FAMILIES) == assumed
    # A user's explicit choice is not overturned by a prompt of another family (the mismatch is the user's call).
    chosen = detect_family({"name": "R7", "node_type": "qemu"}, choice="junos")
    kept = confirm_by_prompt(chosen, "\r\n<R7>", FAMILIES)
    assert (kept.family, kept.confidence) == ("junos", "chosen") and "Huawei VRP" in kept.note
