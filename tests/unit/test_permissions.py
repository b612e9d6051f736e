"""How a permission refusal reads (the real checks: tests/integration/test_permissions_gns3.py)."""

from __future__ import annotations

from langchain_core.tools import ToolException

from gns3server.agent.gns3_copilot.gns3_client.exceptions import GNS3AuthenticationError, GNS3PermissionError
from gns3server.agent.gns3_copilot.tools.permissions import console_path, gns3_refusal, refusal


def test_refusals_name_the_privilege_and_the_target():
    denied = refusal("denied", "Node.Console", "R1")
    assert isinstance(denied, ToolException) and denied.privilege == "Node.Console"
    assert str(denied) == "you lack Node.Console on R1; GNS3 does not let you do this"
    assert str(refusal("inactive", "Node.Console", "R1")) == "your GNS3 account is deactivated; nothing was done"


def test_gns3s_own_refusals_are_reworded_with_the_privilege_it_names():
    forbidden = GNS3PermissionError("Permission denied (privilege Node.PowerMgmt is required)", status=403,
                                    method="POST", url="http://127.0.0.1:3080/v3/projects/p/nodes/n/start")
    assert str(gns3_refusal(forbidden, "PC1")) == "you lack Node.PowerMgmt on PC1; GNS3 does not let you do this"
    other = GNS3PermissionError("Only the owner may do this", status=403)
    assert str(gns3_refusal(other, "PC1")) == "GNS3 refused this on PC1: Only the owner may do this"
    gone = GNS3AuthenticationError("Not an active user", status=401)
    assert str(gns3_refusal(gone, "PC1")) == "GNS3 no longer accepts your login (Not an active user); nothing was done"


def test_the_console_is_checked_on_the_path_of_gns3s_console_route():
    assert console_path("p-1", "n-1") == "/projects/p-1/nodes/n-1/console/ws"
