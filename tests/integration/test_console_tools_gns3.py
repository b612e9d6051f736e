"""The console tools against a real gns3-server: nodes and their consoles as GNS3 gives them."""

from __future__ import annotations

import pytest
from gns3_labs import vpcs_template_id
from langchain_core.tools import ToolException

from gns3server.agent.gns3_copilot.console import VPCS, AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.tools.console import ConfigCommandsTool, ShowCommandsTool
from gns3server.agent.gns3_copilot.tools.errors import ToolError, failure_outcome
from tests.support.gns3_admin import OwnSessionClient


async def allow_all(privilege: str, path: str) -> str:
    """Outside the server there is no GNS3 RBAC to ask; permissions are tested in test_permissions_gns3."""
    return "allowed"

pytestmark = pytest.mark.integration


async def test_tools_read_consoles_from_gns3_and_report_stopped_nodes(gns3_server, gns3_client, gns3_project, tmp_path):
    project_id = gns3_project["project_id"]
    node = await gns3_client.create_node_from_template(project_id, await vpcs_template_id(gns3_client), name="PC1")
    token = await gns3_server.token()
    audit = AuditLog(tmp_path)
    common = {
        "client_factory": lambda: OwnSessionClient(gns3_server.base_url, token=token), "project_id": project_id,
        "policy": load_policy(), "locks": DeviceLocks(), "audit": audit, "authorize": allow_all, "user": "admin", "session_id": "s1",
    }
    show, config = ShowCommandsTool(**common), ConfigCommandsTool(**common)
    try:
        # Stopped in GNS3 and nothing serves its console: the call failed (its only device did), said
        # with the device's outcome, and audited as not run.
        with pytest.raises(ToolError, match="- PC1: PC1 is stopped; start it first") as failed:
            await show.ainvoke({"devices": ["pc1"], "commands": ["show ip"]})
        (stopped,) = failure_outcome(failed.value)["devices"]
        assert stopped["status"] == "failed" and stopped["error"].startswith("PC1 is stopped; start it first")
        with pytest.raises(ToolException, match="no node named 'R9'"):
            await config.ainvoke({"device": "R9", "commands": ["hostname R9"]})
        (listed,) = await gns3_client.nodes(project_id)
        device = show._device(listed)
        assert (device.name, device.port, device.driver, device.reported_status) == ("PC1", node["console"], VPCS, "stopped")
        assert device.host not in ("", "0.0.0.0", "::")
        assert [(e.command, e.outcome) for e in await audit.entries()] == [("show ip", "not_run")]
    finally:
        await audit.close()
