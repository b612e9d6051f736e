"""A tool output cut to fit the window is still the JSON document it was.

The tool gate hands the model a console tool's result as JSON. Cut head-and-tail
as plain text, the document lost its closing brackets and the marker's raw line
breaks landed inside a JSON string (seen at a 16K window on a running
configuration): the model read a broken document. Cut inside its structure, the
cut is in the device's output, escaped, and the rest parses.
"""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter, json_text
from gns3server.agent.gns3_copilot.agent.context.history import TRUNCATION_MARKER, truncate_message
from tests.unit.test_context_window import make_hook

COUNTER = TokenCounter()
MARKER_TEXT = "tokens cut here by GNS3 Copilot"
CAP_TEXT = "tokens of this output cut here by GNS3 Copilot"


def running_config(lines: int) -> str:
    body = []
    for i in range(lines):
        body += [f"interface GigabitEthernet0/{i}", f' description "uplink {i}"', f" ip address 10.0.{i}.1 255.255.255.0",
                 " ip ospf hello-interval 1", "!"]
    return "\n".join(["Building configuration...", *body, "end"])


def show_result(outputs: dict[str, str], command: str = "show running-config") -> str:
    """A gns3_show_commands result as the tool gate serialises it."""
    return json_text({"devices": [
        {"device": name, "status": "ok", "results": [{"command": command, "status": "ok", "output": output,
                                                      "errors": []}]}
        for name, output in outputs.items()]})


def tool_turn(content: str) -> list:
    call = {"name": "gns3_show_commands", "args": {"devices": ["R1"], "commands": ["show running-config"]}, "id": "c1"}
    return [HumanMessage("why is R1 down?", id="h0"), AIMessage("", tool_calls=[call], id="a0"),
            ToolMessage(content, tool_call_id="c1", name="gns3_show_commands", id="t0"), AIMessage("I read it.", id="b0")]


def test_an_output_capped_at_a_16k_window_is_still_json_cut_inside_the_device_output():
    config = running_config(400)
    content = show_result({"R1": config})
    out = make_hook(limit=16)({"messages": [*tool_turn(content), HumanMessage("and now?", id="h1")]})
    capped = out["messages"][3]
    assert isinstance(capped, ToolMessage) and capped.content != content
    cap = int(0.1 * out["context_report"]["message_budget"])
    assert COUNTER.content(capped.content) <= cap
    doc = json.loads(capped.content)  # the old cut: "Unterminated string" / "Invalid control character"
    (device,) = doc["devices"]
    assert device["device"] == "R1" and device["status"] == "ok"
    (result,) = device["results"]
    assert result["command"] == "show running-config" and result["errors"] == []
    output = result["output"]
    assert CAP_TEXT in output  # the marker is in the output, its line breaks escaped with it
    head, tail = output.split("\n[...")[0], output.split("...]\n")[-1]
    assert config.startswith(head) and config.endswith(tail) and len(head) > 40 and len(tail) > 40


def test_an_output_cut_to_fit_the_history_is_still_json():
    content = show_result({"R1": running_config(300)})
    cut = truncate_message(ToolMessage(content, tool_call_id="c1"), 600, COUNTER)
    assert COUNTER.message(cut) <= 600
    output = json.loads(cut.content)["devices"][0]["results"][0]["output"]
    assert MARKER_TEXT in output and output.startswith("Building configuration...") and output.endswith("end")
    assert TRUNCATION_MARKER.strip().split()[0] in output


def test_many_devices_cut_keep_whole_devices_around_one_marker_entry():
    # Short outputs on many devices: cutting each string is not enough, so middle devices go, replaced by
    # one entry saying so; the devices kept are whole.
    outputs = {f"R{i}": f"Neighbor ID     Pri State    Dead Time Address\n10.255.0.{i} 1 Full/- 3.5s 10.0.{i}.2"
               for i in range(1, 61)}
    content = show_result(outputs, "show ip ospf neighbor")
    cut = truncate_message(ToolMessage(content, tool_call_id="c1"), 400, COUNTER)
    assert COUNTER.message(cut) <= 400
    devices = json.loads(cut.content)["devices"]
    markers = [d for d in devices if isinstance(d, str)]
    assert len(markers) == 1 and MARKER_TEXT in markers[0]
    kept = [d for d in devices if isinstance(d, dict)]
    assert kept[0]["device"] == "R1" and kept[-1]["device"] == "R60" and 2 <= len(kept) < 60
    for device in kept:  # whole, as the tool returned it
        assert device["results"][0]["output"] == outputs[device["device"]]


def test_an_output_that_is_not_json_is_still_cut_as_text():
    text = running_config(300)
    cut = truncate_message(ToolMessage(text, tool_call_id="c1"), 300, COUNTER)
    assert MARKER_TEXT in cut.content and cut.content.startswith("Building") and cut.content.endswith("end")
    assert COUNTER.message(cut) <= 300
