"""The default policy against a corpus of commands as engineers type them (see ``console_corpus``)."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.console import load_policy
from gns3server.agent.gns3_copilot.console.policy import FAMILIES

from .console_corpus import corpus

ENTRIES = corpus()
POLICY = load_policy()


def test_corpus_size():
    verdicts = [entry.verdict for entry in ENTRIES]
    dangerous = sum(v.startswith("blocked:") or v == "incomplete" for v in verdicts)
    harmless = sum(v in ("read", "config") for v in verdicts)
    assert dangerous >= 250 and harmless >= 150, (dangerous, harmless)
    assert {entry.family for entry in ENTRIES} == set(FAMILIES)
    assert dangerous + harmless == len(ENTRIES)  # no verdict outside the four kinds
    for family in FAMILIES:  # every family has its own adversary cases, both ways
        verdicts = [e.verdict for e in ENTRIES if e.family == family]
        assert sum(v.startswith("blocked:") for v in verdicts) >= 15, family
        assert verdicts.count("read") >= 15 and verdicts.count("config") >= 5, family


def test_every_rule_of_every_family_is_exercised():
    """Each dangerous rule a family names is hit by at least one command of that family."""
    hit = {(e.family, e.verdict.removeprefix("blocked:")) for e in ENTRIES if e.verdict.startswith("blocked:")}
    for rule in POLICY.dangerous:
        for family in rule.patterns:
            if family in FAMILIES and rule.name != "dynamic_command":
                assert (family, rule.name) in hit, (family, rule.name)


@pytest.mark.parametrize(
    ("family", "verdict", "command"),
    [pytest.param(e.family, e.verdict, e.command, id=f"{e.line}-{e.family}-{e.command}") for e in ENTRIES],
)
def test_corpus(family, verdict, command):
    read_only = POLICY.check(command, family=family, read_only=True)
    config = POLICY.check(command, family=family, read_only=False)
    if verdict == "read":
        assert read_only.allowed, read_only.reason
        assert config.allowed, config.reason
    elif verdict == "config":
        assert not read_only.allowed and read_only.reason.startswith("read-only mode"), read_only.reason
        assert config.allowed, config.reason
    elif verdict == "incomplete":
        for decision in (read_only, config):
            assert not decision.allowed and decision.reason.startswith("blocked: incomplete"), decision.reason
    else:
        rule = verdict.removeprefix("blocked:")
        for decision in (read_only, config):
            assert not decision.allowed and decision.reason.startswith(f"blocked by policy ({rule}):"), decision.reason
