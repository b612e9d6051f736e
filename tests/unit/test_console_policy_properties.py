"""Property: a command read-only mode allows, with a separator, redirection or substitution appended, is refused."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gns3server.agent.gns3_copilot.console import load_policy

from .console_corpus import corpus

POLICY = load_policy()
READ = {f: [e.command for e in corpus() if (e.family, e.verdict) == (f, "read")] for f in ("ios", "linux", "vpcs")}

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
    """Without this the property below would hold vacuously."""
    for family, commands in READ.items():
        assert len(commands) >= 20, family
        assert all(POLICY.check(c, family=family, read_only=True).allowed for c in commands)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), family=st.sampled_from(["ios", "linux", "vpcs"]))
def test_anything_appended_to_an_allowed_command_is_refused(data, family):
    base = data.draw(st.sampled_from(READ[family])).strip()
    command = _appended(data, base)
    assert _refused(command, family), command


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_pipes_into_non_filters_are_refused(data):
    base = data.draw(st.sampled_from(READ["linux"])).strip()
    pipe = data.draw(st.sampled_from(["|", "|&", " | ", " |& "]))
    command = f"{base}{pipe}{data.draw(st.sampled_from(NOT_FILTERS))}"
    assert _refused(command, "linux"), command


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_ios_output_modifiers_that_do_not_filter_are_refused(data):
    base = data.draw(st.sampled_from([c for c in READ["ios"] if c.lstrip().casefold().startswith(("sh", "do"))])).strip()
    command = f"{base} | {data.draw(st.sampled_from(NOT_MODIFIERS))}"
    assert _refused(command, "ios"), command
