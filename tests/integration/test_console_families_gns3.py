"""Which CLI family each node is, on a real gns3-server: nodes made from the registry's appliances.

Templates are made through GNS3's API from the appliance files gns3-server ships
(their names and image files), QEMU nodes from them (GNS3 creates QEMU nodes without
starting them), and the node and template JSON GNS3 then returns is what the copilot
reads. The per-node choice is set through ``/v3/copilot``: a user GNS3 lets edit the
node may (its own ``Node.Modify`` check), an auditor may not; both are audited.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from test_copilot_api import API, admin, http  # noqa: F401
from test_permissions_gns3 import person

from gns3server.agent.gns3_copilot.console.detect import detect_family

pytestmark = pytest.mark.integration

APPLIANCES = Path(str(resources.files("gns3server") / "appliances"))
BUILT_IN_DISKS = Path(str(resources.files("gns3server") / "disks"))
# QEMU appliances of the families, and what GNS3's own data says they are.
QEMU = {
    "arista-veos.gns3a": "eos", "juniper-vJunos-router.gns3a": "junos", "cisco-iosxrv9k.gns3a": "iosxr",
    "cisco-nxosv9k.gns3a": "nxos", "mikrotik-chr.gns3a": "routeros", "huawei-ne40e.gns3a": "vrp", "vyos.gns3a": "vyos",
    "fortigate.gns3a": "fortios", "cumulus-vx.gns3a": "cumulus", "frr.gns3a": "frr", "cisco-iosv.gns3a": "ios",
    "nokia-vsim.gns3a": None,
}
DOCKER = {"arista-ceos.gns3a": "eos", "alpine-linux.gns3a": "linux"}
IMAGE_FIELDS = ("hda_disk_image", "hdb_disk_image", "cdrom_image")
QCOW2 = b"QFI\xfb" + bytes(60)


def template_body(appliance: str, suffix: str) -> dict[str, Any]:
    """The template GNS3's "add from appliance" makes (its name, image files, console)."""
    data = json.loads((APPLIANCES / appliance).read_text("utf-8"))
    version = data["versions"][0] if data.get("versions") else {}
    # (GNS3 names nodes after the template: no version in it, "(" is not allowed in node names)
    common = {"name": f"{data['name']} {suffix}", "compute_id": "local", "console_type": "telnet"}
    if "docker" in data:
        return {**common, "template_type": "docker", "image": data["docker"]["image"]}
    images = {k: v for k, v in version.get("images", {}).items() if k in IMAGE_FIELDS}
    return {**common, "template_type": "qemu", "platform": "x86_64", "ram": 128, **images}


async def known_images(admin: API) -> set[str]:
    """The image files GNS3 has. Its built-in disks (empty30G.qcow2 ...) are installed in the
    background as it starts: uploading one meanwhile is a UNIQUE-path error, and a template
    naming one before it is listed a 404; so they are awaited (a generous deadline), never uploaded."""
    built_in = {disk.name for disk in BUILT_IN_DISKS.iterdir() if disk.suffix == ".qcow2"}
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        status, images = await admin.get("/v3/images")
        assert status == 200, images
        listed = {image["filename"] for image in images}
        if built_in <= listed:
            return listed
        assert asyncio.get_running_loop().time() < deadline, f"GNS3 never listed {sorted(built_in - listed)}"
        await asyncio.sleep(0.2)


async def appliance_template(admin: API, appliance: str, suffix: str, known: set[str]) -> dict[str, Any]:
    """A template as GNS3's "add from appliance" makes it, its image files uploaded first (once)."""
    body = template_body(appliance, suffix)
    for field in IMAGE_FIELDS:  # GNS3 wants its images known; a QCOW2 header is all it checks
        if field in body and body[field] not in known:
            known.add(body[field])
            # (GNS3 keeps one image per checksum: each file's bytes differ)
            status, image = await admin.call("POST", f"/v3/images/upload/{body[field]}", raw=QCOW2 + body[field].encode())
            assert status == 201, (body[field], image)
    status, template = await admin.post("/v3/templates", body)
    assert status == 201, template
    return template


@pytest.fixture(scope="module")
async def lab(admin: API) -> AsyncIterator[dict[str, Any]]:
    """A project with one node per QEMU appliance of QEMU, and the templates (Docker ones too)."""
    suffix = uuid.uuid4().hex[:6]
    status, project = await admin.post("/v3/projects", {"name": f"families-{suffix}"})
    assert status == 201, project
    templates, nodes = {}, {}
    known = await known_images(admin)
    try:
        for appliance in (*QEMU, *DOCKER):
            template = await appliance_template(admin, appliance, suffix, known)
            templates[appliance] = template
            if appliance in QEMU:
                status, node = await admin.post(f"/v3/projects/{project['project_id']}/templates/{template['template_id']}",
                                                {"x": 0, "y": 0})
                assert status == 201, node
                nodes[appliance] = node
        yield {"project_id": project["project_id"], "templates": templates, "nodes": nodes}
    finally:
        await admin.delete(f"/v3/projects/{project['project_id']}")
        for template in templates.values():
            await admin.delete(f"/v3/templates/{template['template_id']}")


async def test_nodes_as_gns3_returns_them_are_their_family(admin: API, lab):
    status, nodes = await admin.get(f"/v3/projects/{lab['project_id']}/nodes")
    assert status == 200
    status, templates = await admin.get("/v3/templates")
    assert status == 200
    by_id = {t["template_id"]: t for t in templates}
    names = {node["node_id"]: appliance for appliance, node in lab["nodes"].items()}
    for node in nodes:
        detection = detect_family(node, by_id[node["template_id"]])
        assert detection.family == QEMU[names[node["node_id"]]], (node["name"], detection)
        assert detection.confidence == "high" and detection.evidence[0].source == "image"
    for appliance, family in DOCKER.items():  # no Docker daemon here: the template alone
        template = by_id[lab["templates"][appliance]["template_id"]]
        node = {"name": "x", "node_type": "docker", "properties": {"image": template["image"]}}
        assert detect_family(node, template).family == family


async def test_the_copilot_route_lists_families_and_a_user_who_may_edit_chooses(admin: API, gns3_server, lab):
    project_id = lab["project_id"]
    status, listed = await admin.get(f"/v3/copilot/projects/{project_id}/families")
    assert status == 200, listed
    by_name = {entry["name"]: entry for entry in listed}
    vjunos = lab["nodes"]["juniper-vJunos-router.gns3a"]
    assert by_name[vjunos["name"]]["family"] == "junos" and not by_name[vjunos["name"]]["assumed"]
    vsim = by_name[lab["nodes"]["nokia-vsim.gns3a"]["name"]]
    assert vsim["family"] is None and vsim["assumed"] and "Nokia SR OS" in vsim["note"]

    path = f"/v3/copilot/projects/{project_id}/nodes/{vsim['node_id']}/family"
    auditor = await person(admin, gns3_server, "auditor", "Auditor", f"/projects/{project_id}")
    status, refused = await auditor.api.put(path, {"family": "junos"})
    assert status == 403 and "Node.Modify" in refused["message"], refused
    status, seen = await auditor.api.get(path)  # an auditor still reads it
    assert status == 200 and seen["family"] is None

    status, bad = await admin.put(path, {"family": "sros"})
    assert status == 422 and "family" in bad["message"]
    status, chosen = await admin.put(path, {"family": "junos"})
    assert status == 200, chosen
    assert (chosen["family"], chosen["confidence"], chosen["chosen_by"]) == ("junos", "chosen", "admin")
    status, again = await admin.get(path)
    assert (again["family"], again["chosen_by"]) == ("junos", "admin")
    status, forgotten = await admin.put(path, {"family": None})
    assert status == 200 and forgotten["family"] is None and forgotten["chosen_by"] is None

    status, audit = await admin.get(f"/v3/copilot/console/audit?project_id={project_id}")
    assert status == 200
    mine = [(e["user"], e["device"], e["command"], e["outcome"]) for e in audit]
    assert (auditor.username, vsim["name"], "family junos", "denied") in mine
    assert ("admin", vsim["name"], "family junos", "ok") in mine
    assert ("admin", vsim["name"], "family detected", "ok") in mine

    status, missing = await admin.get(f"/v3/copilot/projects/{project_id}/nodes/{uuid.uuid4()}/family")
    assert status == 404, missing
