"""The teaching catalogue: every shipped scenario valid, hints that never give the fix, bad files refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.console import load_policy
from gns3server.agent.gns3_copilot.teaching.catalogue import (
    SHIPPED,
    ScenarioFileError,
    load_catalogue,
    read_catalogue,
)
from gns3server.agent.gns3_copilot.teaching.guard import replays
from gns3server.agent.gns3_copilot.teaching.scenario import fix_values
from gns3server.agent.gns3_copilot.teaching.service import AssignmentFailedError, TeachingService, match_roles

GOOD = '''
[[scenario]]
id = "x-wrong-gateway"
title = "Wrong gateway"
level = "ccna"
topic = "gateway"
brief = "{pc} is stuck on its LAN."
roles.pc = { family = "vpcs" }
params = { gateway = "10.0.0.254" }
inject = [{ role = "pc", commands = ["ip 10.0.0.1/24 10.0.0.250"] }]
revert = [{ role = "pc", commands = ["ip 10.0.0.1/24 {gateway}"] }]
checks = [{ kind = "route", device = "pc", prefix = "default", via = "{gateway}" }]
hints = ["one", "two", "three"]
'''


@pytest.fixture(scope="module")
def catalogue():
    return read_catalogue([SHIPPED])


def test_the_shipped_catalogue_has_thirty_scenarios_over_every_family_and_level(catalogue):
    scenarios = list(catalogue.scenarios.values())
    assert len(scenarios) >= 30
    families = {role.family for s in scenarios for role in s.roles.values()}
    assert families == {"vpcs", "linux", "frr"}
    assert {s.level for s in scenarios} == {"ccna", "ccnp"}
    topics = {s.topic for s in scenarios}
    assert {"addressing", "mask", "gateway", "interface_down", "static_route", "dns", "ospf_area", "ospf_hello",
            "ospf_mtu", "ospf_passive", "ospf_network", "bgp_as", "bgp_next_hop", "bgp_neighbor",
            "redistribution", "filtering"} <= topics


def test_every_shipped_scenario_renders_and_no_hint_contains_its_fix(catalogue):
    for scenario in catalogue.scenarios.values():
        rendered = scenario.render({r: f"Node-{r}" for r in scenario.roles})
        assert len(rendered.hints) == 3 and rendered.checks, scenario.id
        revert = [" ".join(c.split()).casefold() for _, cs in rendered.revert for c in cs if len(c.split()) > 1]
        secrets = fix_values(rendered)
        for hint in rendered.hints:
            text = " ".join(hint.split()).casefold()
            assert not [c for c in revert if c in text], (scenario.id, hint)
            assert not [v for v in secrets if v in hint], (scenario.id, hint, secrets)
        assert all(device for device, _ in rendered.inject)


def test_a_hint_that_gives_the_fix_away_is_refused(tmp_path):
    (tmp_path / "a.toml").write_text(GOOD.replace('"two"', '"Set the gateway to 10.0.0.254."'))
    with pytest.raises(ScenarioFileError) as caught:
        read_catalogue([tmp_path])
    error = caught.value
    assert (Path(error.path).name, error.entry, error.field) == ("a.toml", "#1 (x-wrong-gateway)", "hints.1")
    assert "10.0.0.254" in error.why and "gives the fix away" in error.why
    (tmp_path / "a.toml").write_text(GOOD.replace('"three"', '"Type: ip 10.0.0.1/24 {gateway}"'))
    with pytest.raises(ScenarioFileError, match="hints.2: gives the fix away"):
        read_catalogue([tmp_path])


@pytest.mark.parametrize(("change", "field", "why"), [
    (('level = "ccna"', 'level = "expert"'), "level", "'ccna' or 'ccnp'"),
    (('hints = ["one", "two", "three"]', 'hints = ["one", "two"]'), "hints", "exactly 3 hints"),
    (('role = "pc", commands = ["ip 10.0.0.1/24 10.0.0.250"]', 'role = "router", commands = ["x y"]'),
     "inject.0.role", "not one of the roles"),
    (('via = "{gateway}"', 'via = "{gw}"'), "checks.0.via", "{gw} is neither a role nor a param"),
    (('prefix = "default"', 'prefix = "nowhere"'), "checks.0", "not a network prefix"),
    (('device = "pc"', 'device = "R9"'), "checks.0.device", "not one of the roles"),
    (('topic = "gateway"', 'topic = "gateway"\nsecret = 1'), "secret", "Extra inputs are not permitted"),
])
def test_a_bad_scenario_is_refused_with_file_entry_field_and_why(tmp_path, change, field, why):
    (tmp_path / "ok.toml").write_text(GOOD.replace("x-wrong-gateway", "x-ok"))
    (tmp_path / "teacher.toml").write_text(GOOD.replace(*change))
    with pytest.raises(ScenarioFileError) as caught:
        read_catalogue([tmp_path])
    error = caught.value
    assert Path(error.path).name == "teacher.toml" and error.entry == "#1 (x-wrong-gateway)", error
    assert error.field == field and why in error.why, (error.field, error.why)


def test_a_broken_file_and_a_duplicate_id_are_refused(tmp_path):
    (tmp_path / "a.toml").write_text("[[scenario]\nid = ")
    with pytest.raises(ScenarioFileError, match=r"a.toml: scenario -: file: not valid TOML"):
        read_catalogue([tmp_path])
    (tmp_path / "a.toml").write_text(GOOD)
    (tmp_path / "b.toml").write_text(GOOD)
    with pytest.raises(ScenarioFileError, match=r"b.toml: scenario x-wrong-gateway: id: already defined in .*a.toml"):
        read_catalogue([tmp_path])
    (tmp_path / "b.toml").write_text(GOOD.replace("x-wrong-gateway", "vpcs-wrong-gateway"))
    with pytest.raises(ScenarioFileError, match="already defined"):  # an administrator cannot shadow a shipped one
        read_catalogue([SHIPPED, tmp_path])


async def test_an_administrators_file_is_loaded_after_the_shipped_ones_in_a_worker_thread(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    catalogue = await load_catalogue(tmp_path)
    assert catalogue.get("x-wrong-gateway").title == "Wrong gateway"
    assert catalogue.sources["x-wrong-gateway"].endswith("mine.toml")
    assert "vpcs-wrong-address" in catalogue.scenarios


def test_the_same_seed_draws_the_same_scenarios(catalogue):
    first = [s.id for s in catalogue.draw("ccnp", 4, seed=42)]
    assert first == [s.id for s in catalogue.draw("ccnp", 4, seed=42)]
    others = {tuple(s.id for s in catalogue.draw("ccnp", 4, seed=n)) for n in range(10)}
    assert len(others) > 1
    with pytest.raises(ValueError, match="count: 99 scenarios of level ccna asked"):
        catalogue.draw("ccna", 99, seed=1)


def test_the_guard_recognises_a_replay_of_the_recorded_undo_only():
    undo = {"tool": "gns3_config_commands", "args": {"device": "PC1", "commands": ["ip 10.0.0.1/24 10.0.0.254"]}}
    call = {"name": "gns3_config_commands", "args": {"device": "PC1", "commands": ["IP  10.0.0.1/24 10.0.0.254"]}}
    assert replays(call, undo)
    assert replays({**call, "args": {**call["args"], "commands": ["show ip", "ip 10.0.0.1/24 10.0.0.254"]}}, undo)
    assert not replays({**call, "args": {**call["args"], "device": "PC2"}}, undo)
    assert not replays({**call, "args": {**call["args"], "commands": ["ip 10.0.0.1 255.255.255.0 10.0.0.254"]}}, undo)


def test_every_shipped_command_passes_the_default_console_policy_in_every_clis_grammar(catalogue):
    """A QEMU node running FRR (or a bash behind any node) has no CLI GNS3 confirms: every grammar judges."""
    policy = load_policy()
    refused = []
    for scenario in catalogue.scenarios.values():
        rendered = scenario.render({r: r.upper() for r in scenario.roles})
        for _, commands in (*rendered.inject, *rendered.revert):
            for command in commands:
                decision = policy.check(command, family=None, read_only=False, config_mode=True)
                if not decision.allowed:
                    refused.append((scenario.id, command, decision.reason))
    assert refused == []


def test_roles_are_matched_by_family_or_as_the_teacher_names_them_and_a_draw_keeps_to_what_fits(catalogue):
    nodes = [{"name": "PC2", "node_type": "vpcs"}, {"name": "PC1", "node_type": "vpcs"},
             {"name": "R1", "node_type": "qemu"}]
    scenario = catalogue.get("vpcs-wrong-gateway")
    assert match_roles(scenario, nodes, {}) == {"pc": "PC1"}
    assert match_roles(scenario, nodes, {"pc": "PC2"}) == {"pc": "PC2"}
    with pytest.raises(AssignmentFailedError, match="nodes.pc: the project has no node 'PC9'"):
        match_roles(scenario, nodes, {"pc": "PC9"})
    with pytest.raises(AssignmentFailedError, match="nodes.host: no linux node in the project can play it"):
        match_roles(catalogue.get("linux-wrong-gateway"), nodes, {})
    fits = [s for s in catalogue.by_level("ccna") if TeachingService._fits(s, nodes, {})]
    assert {r.family for s in fits for r in s.roles.values()} == {"vpcs"}
    drawn = [s.id for s in catalogue.draw("ccna", 2, seed="class-1", eligible=fits)]
    assert drawn == [s.id for s in catalogue.draw("ccna", 2, seed="class-1", eligible=fits)]
    assert all(i.startswith("vpcs-") for i in drawn)

