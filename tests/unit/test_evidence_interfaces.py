"""A claim about an interface whose name no known scheme has (``peer0``, a veth's other end) is judged on that
interface's line, never read as a claim about the device itself (which answered, so it "is up")."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.evidence.claims import claims_of
from gns3server.agent.gns3_copilot.evidence.matcher import judge_all
from gns3server.agent.gns3_copilot.evidence.reads import Evidence

# iproute2's ip -o link show in a namespace: eth0 up, peer0 (a veth) down.
LINKS = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT\n"
         "2: eth0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT\n"
         "3: peer0@if2: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT")
READ = [Evidence("R1", "ip -o link show", LINKS, "ok", "console", "gns3_show_commands", evidence_id="E1",
                 session_id="s", turn_id="t", at=1.0)]


def verdict(sentence: str) -> tuple[str, str]:
    (judged,) = judge_all(claims_of(sentence, ["R1"], "m"), READ)
    return judged.verdict, judged.reason


@pytest.mark.parametrize(("sentence", "expected"), [
    ("R1's peer0 is up.", "contradicted"),
    ("R1's peer0 is down.", "verified"),
    ("On R1, peer0 is still up.", "contradicted"),
    ("Interface peer0 on R1 is up.", "contradicted"),
    ("R1's peer0 link is not up.", "verified"),
    ("R1's eth0 is up.", "verified"),  # a known name, as before
])
def test_an_unknown_interface_name_is_judged_on_its_own_line(sentence, expected):
    found, reason = verdict(sentence)
    assert found == expected, reason
    assert ("peer0@if2" in reason) == ("peer0" in sentence)


def test_an_interface_no_read_shows_is_not_verified():
    found, reason = verdict("R1's wlp0 is up.")
    assert found == "unsupported" and "wlp0" in reason, reason


@pytest.mark.parametrize("sentence", ["R1 is up.", "R1's OSPFv2 process is up.", "R1's BGP4 session is up."])
def test_the_device_and_protocols_with_digits_stay_what_they_were(sentence):
    (claim,) = claims_of(sentence, ["R1"], "m")
    assert all(f.value is None or f.value.kind != "interface" for f in claim.facts), claim.facts
