"""Which tools a run gets, and in which mode."""

from __future__ import annotations

from dataclasses import replace

from gns3server.agent.gns3_copilot.agent.policies.modes import tools_for_mode
from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.tools.gate import needs_confirmation
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices, RunContext, build_tools
from tests.support.gns3_admin import OwnSessionClient

CONTEXT = RunContext(lambda: OwnSessionClient("http://127.0.0.1:1"), "p1", "alice", "s1", "u-alice")


def permissions_of(user_id: str):
    async def authorize(privilege: str, path: str) -> str:
        return "allowed" if user_id == "u-alice" else "denied"

    authorize.user_id = user_id
    return authorize


def test_without_console_services_there_are_no_console_tools():
    assert [t.name for t in build_tools(CONTEXT)] == [
        "gns3_topology", "gns3_list_templates", "gns3_node_action", "gns3_create_node", "gns3_create_link",
        "gns3_update_link",
    ]


def test_console_tools_act_for_the_run_and_config_needs_confirmation(tmp_path):
    console = ConsoleServices(load_policy(), DeviceLocks(), AuditLog(tmp_path), permissions_of)
    tools = {t.name: t for t in build_tools(CONTEXT, console)}
    show, config = tools["gns3_show_commands"], tools["gns3_config_commands"]
    assert (config.user, config.session_id, config.project_id) == ("alice", "s1", "p1")
    assert config.audit is console.audit and show.locks is console.locks
    # Permission checks are the run's user's, and GNS3's refusals of the other tools are audited.
    assert show.authorize.user_id == config.authorize.user_id == "u-alice"
    assert tools["gns3_node_action"].audit is console.audit and tools["gns3_create_link"].user == "alice"
    assert needs_confirmation(config) and not needs_confirmation(show)
    teaching = {t.name for t in tools_for_mode(list(tools.values()), "teaching")}
    assert teaching == {"gns3_topology", "gns3_list_templates", "gns3_show_commands"}


def test_only_fault_injection_runs_record_how_to_undo(tmp_path):
    console = ConsoleServices(load_policy(), DeviceLocks(), AuditLog(tmp_path), permissions_of)
    plain = {t.name: t for t in build_tools(CONTEXT, console)}
    injecting = {t.name: t for t in build_tools(replace(CONTEXT, record_undo=True), console)}
    assert plain["gns3_config_commands"].record_undo is False
    assert injecting["gns3_config_commands"].record_undo is True
    link = injecting["gns3_update_link"]
    assert link.audit is console.audit and (link.user, link.session_id) == ("alice", "s1")
    assert not needs_confirmation(link)  # as the node tools: GNS3's Link.Modify decides
