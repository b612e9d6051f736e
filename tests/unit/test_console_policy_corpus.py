"""The default policy against a corpus of commands as engineers type them (see ``console_corpus``)."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.console import load_policy

from .console_corpus import corpus

ENTRIES = corpus()
POLICY = load_policy()


def test_corpus_size():
    verdicts = [entry.verdict for entry in ENTRIES]
    dangerous = sum(v.startswith("blocked:") or v == "incomplete" for v in verdicts)
    harmless = sum(v in ("read", "config") for v in verdicts)
    assert dangerous >= 250 and harmless >= 150, (dangerous, harmless)
    assert {entry.family for entry in ENTRIES} == {"ios", "linux", "vpcs", "frr", "bird"}
    assert dangerous + harmless == len(ENTRIES)  # no verdict outside the four kinds


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
