"""Property: a command read-only mode allows, with a separator, redirection or substitution appended, is refused."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gns3server.agent.gns3_copilot.console import load_policy
from gns3server.agent.gns3_copilot.console.policy import FAMILIES, lineage

from .console_corpus import corpus

POLICY = load_policy()
READ = {f: [e.command for e in corpus() if (e.family, e.verdict) == (f, "read")] for f in FAMILIES}
SHELLS = [f for f in FAMILIES if "linux" in lineage(f)]  # a bash line: Linux, VyOS, Cumulus
# vtysh has no separators, redirections or substitutions: "write terminal ; x" or "$(x)" are words of
# one command it does not know (its grammar resolves the whole line against FRR's own commands, and
# test_console_frr.py checks lines like these against the real vtysh).
APPENDING = [f for f in FAMILIES if f != "frr"]
# The CLIs whose "|" starts an output modifier, and modifiers of theirs that write, run or never end.
MODIFIER_CLIS: dict[str, list[str]] = {
    "eos": ["redirect flash:x", "tee flash:x", "append flash:x", "bash", "xyz", ""],
    "nxos": ["redirect bootflash:x", "tee bootflash:x", "vsh", "less", "email", "sed s/a/b/", "python", "xyz", ""],
    "iosxr": ["file disk0:x", "utility tail -f", "utility script", "xyz", ""],
    "junos": ["save /var/tmp/x", "append /var/tmp/x", "tee /var/tmp/x", "refresh 1", "hold", "request message all x",
              "display commit-scripts", "xyz", ""],
    "srlinux": ["more", "bash", "sh", "python3", "tee /tmp/x", "xargs rm", "as json | bash", ""],
    "vrp": ["refresh", "xyz", ""],
    "fortios": ["sh", "tee x", "xyz", ""],
}

SEPARATORS = [";", "&&", "||", "&", ";;"]
REDIRECTIONS = [">", ">>", ">|", "<", "<>", "&>", "&>>", "2>", "2>>", "1>", "<<", "<<-", "<<<", ">&", "2>&1", "<&", "0<"]
SUBSTITUTIONS = [("$(", ")"), ("`", "`"), ("<(", ")"), (">(", ")"), ("$((", "))"), ("${", "}"), ("$", "")]
# Pipes into commands that are not filters (Linux), or output modifiers that are not (IOS).
NOT_FILTERS = ["reboot", "sh", "bash -c x", "tee /tmp/x", "xargs rm", "sed s/a/b/", "awk '{print}'", "less", "dd of=/x",
               "sudo tee x", "python3", "env", "nc 10.0.0.1 80"]
NOT_MODIFIERS = ["redirect flash:x", "tee flash:x", "append flash:x", "archive", "format x", "red nvram:startup-config",
                 "t x", "a x", "r x", "xyz", ""]

# Printable text without line breaks or other control characters (those are refused on their own).
tails = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=24)
blanks = st.sampled_from(["", " ", "  "])


def _appended(data: st.DataObject, base: str) -> str:
    kind = data.draw(st.sampled_from(["separator", "redirection", "substitution"]))
    gap, tail = data.draw(blanks), data.draw(tails)
    if kind == "separator":
        return f"{base}{gap}{data.draw(st.sampled_from(SEPARATORS))}{data.draw(blanks)}{tail}"
    if kind == "redirection":
        return f"{base}{data.draw(st.sampled_from([' ', '  ']))}{data.draw(st.sampled_from(REDIRECTIONS))}{data.draw(blanks)}{tail}"
    opening, closing = data.draw(st.sampled_from(SUBSTITUTIONS))
    body = data.draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_ ./-]{0,12}", fullmatch=True)) if opening == "$" else tail
    return f"{base}{gap}{opening}{body}{closing}"


def _refused(command: str, family: str) -> bool:
    decision = POLICY.check(command, family=family, read_only=True)
    return not decision.allowed


def test_the_bases_are_allowed():
    """Without this the properties below would hold vacuously."""
    for family, commands in READ.items():
        assert len(commands) >= (20 if family in ("ios", "linux", "vpcs") else 15), family
        assert all(POLICY.check(c, family=family, read_only=True).allowed for c in commands)


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), family=st.sampled_from(APPENDING))
def test_anything_appended_to_an_allowed_command_is_refused(data, family):
    base = data.draw(st.sampled_from(READ[family])).strip()
    command = _appended(data, base)
    assert _refused(command, family), command


@settings(max_examples=300, deadline=None)
@given(data=st.data(), family=st.sampled_from(SHELLS))
def test_pipes_into_non_filters_are_refused(data, family):
    base = data.draw(st.sampled_from(READ[family])).strip()
    pipe = data.draw(st.sampled_from(["|", "|&", " | ", " |& "]))
    command = f"{base}{pipe}{data.draw(st.sampled_from(NOT_FILTERS))}"
    assert _refused(command, family), command


@settings(max_examples=400, deadline=None)
@given(data=st.data(), family=st.sampled_from(sorted(MODIFIER_CLIS)))
def test_modifiers_that_do_not_filter_are_refused_in_every_cli(data, family):
    base = data.draw(st.sampled_from([c for c in READ[family] if "|" not in c])).strip()
    command = f"{base} | {data.draw(st.sampled_from(MODIFIER_CLIS[family]))}"
    assert _refused(command, family), command


@settings(max_examples=300, deadline=None)
@given(data=st.data(), family=st.sampled_from(FAMILIES))
def test_case_and_blanks_do_not_open_a_way_past_a_rule(data, family):
    """A blocked command stays blocked in other letter case and with more blanks between its words
    (the CLIs fold case; a shell's words are case-sensitive, so Linux lineages keep their case)."""
    blocked = [e.command for e in corpus() if e.family == family and e.verdict.startswith("blocked:")]
    command = data.draw(st.sampled_from(blocked))
    if "linux" not in lineage(family):
        command = "".join(ch.upper() if data.draw(st.booleans()) else ch for ch in command)
    command = command.replace(" ", data.draw(st.sampled_from([" ", "  ", " \t "]))).replace("\t", "\t")
    for read_only in (True, False):
        assert not POLICY.check(command, family=family, read_only=read_only).allowed, command


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_ios_output_modifiers_that_do_not_filter_are_refused(data):
    base = data.draw(st.sampled_from([c for c in READ["ios"] if c.lstrip().casefold().startswith(("sh", "do"))])).strip()
    command = f"{base} | {data.draw(st.sampled_from(NOT_MODIFIERS))}"
    assert _refused(command, "ios"), command
