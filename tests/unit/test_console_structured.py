"""Structured show output: the recorded per-command choices hold on the published captures, with our tokenizer."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.agent.context_manager import count_tokens
from gns3server.agent.gns3_copilot.console.families import FAMILY_NAMES, SPECS
from gns3server.agent.gns3_copilot.console.structured import (
    StructuredOutputError,
    choose,
    compact_json,
    compact_rows,
    load_forms,
    text_rows,
)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "structured_output.py"
_spec = importlib.util.spec_from_file_location("structured_bench", BENCH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
CAPTURES = tomllib.loads((bench.DATA / "captures.toml").read_text("utf-8"))["capture"]
FORMS = load_forms()


def test_every_family_has_its_forms_and_the_same_json_modifier():
    assert set(FAMILY_NAMES) <= set(FORMS)
    for name in FAMILY_NAMES:
        assert FORMS[name].json_suffix == SPECS[name].json_suffix, name


@pytest.mark.parametrize("capture", CAPTURES, ids=[f"{c['family']}-{c['command']}" for c in CAPTURES])
def test_the_recorded_choice_is_what_the_measurement_gives(capture):
    """Re-measured now (ntc-templates' installed templates, our tokenizer): a template or tokenizer
    that changed would change the numbers, and this test says so."""
    measured = bench.measure(capture)
    recorded = FORMS[capture["family"]].choice(capture["command"])
    assert recorded is not None
    assert measured["tokens"] == recorded.tokens
    assert measured["choice"] == recorded.use == choose(recorded.tokens)
    if recorded.use == "textfsm":
        assert measured["rows"] >= 1


def test_rows_are_the_templates_fields_compactly():
    raw = (bench.DATA / "eos" / "show_ip_interface_brief.txt").read_text("utf-8")
    rows = text_rows("arista_eos", "sh ip int br", raw)  # ntc-templates' index resolves the abbreviation
    assert rows and {"interface", "ip_address", "status", "protocol"} <= set(rows[0])
    compact = compact_rows(rows)
    assert compact.startswith('{"columns":["interface"') and " " not in compact.split('"rows"')[0]
    assert count_tokens(compact) < count_tokens(raw) * 1.1
    assert compact_json('{\n  "a": [1,\n 2]\n}') == '{"a":[1,2]}'


def test_a_command_without_a_template_is_a_clear_error():
    with pytest.raises(StructuredOutputError, match="command"):
        text_rows("arista_eos", "show frobnication", "whatever")


@pytest.mark.parametrize(("tokens", "form"), [
    ({"raw": 100.0}, "raw"),
    ({"raw": 100.0, "textfsm": 95.0}, "raw"),  # saves less than a tenth: not worth a parser's loss
    ({"raw": 100.0, "textfsm": 50.0}, "textfsm"),
    ({"raw": 100.0, "textfsm": 50.0, "json": 60.0}, "json"),  # the device's own data, within a quarter
    ({"raw": 100.0, "textfsm": 40.0, "json": 60.0}, "textfsm"),
    ({"raw": 100.0, "textfsm": 95.0, "json": 80.0}, "json"),
    ({"raw": 100.0, "json": 120.0}, "raw"),
])
def test_the_rule(tokens, form):
    assert choose(tokens) == form
