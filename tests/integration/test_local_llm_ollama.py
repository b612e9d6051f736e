"""Ollama's native API (provider ``ollama``): its prompt counts calibrate the copilot.

Ollama reports the prompt's tokens in the final chunk of a streamed answer
(``prompt_eval_count``), which ``ChatOllama`` turns into ``usage_metadata``. The real
``ChatOllama``, built by the copilot's model factory, talks to an Ollama-native stub
(``tests/support/ollama_stub.py``); the copilot runs against a real gns3-server with real
tools. Ollama's OpenAI-compatible ``/v1`` streams usage when asked (``stream_options``)
like any such server: the OpenAI stub's tests cover that path.
"""

from __future__ import annotations

import math

import pytest
from langchain_ollama import ChatOllama

from gns3server.agent.gns3_copilot.agent.context_manager import clamp_token_scale
from gns3server.agent.gns3_copilot.agent.model.factory import create_chat_model
from gns3server.agent.gns3_copilot.service.copilot import User
from tests.support.copilot_service import running_copilot
from tests.support.ollama_stub import OllamaStub, ollama_reply
from tests.support.streams import collect, text_of

pytestmark = pytest.mark.integration


@pytest.fixture
async def stub():
    async with OllamaStub() as server:
        yield server


@pytest.fixture
async def copilot(tmp_path, gns3_server):
    async with running_copilot(tmp_path / "copilot", gns3_server.base_url) as service:
        yield service


@pytest.fixture
async def admin(gns3_server) -> User:
    return User("admin-id", "admin", await gns3_server.token(), is_superadmin=True)


def llm(stub: OllamaStub) -> dict:
    return {"provider": "ollama", "model": "qwen2.5:7b", "base_url": stub.base_url, "context_limit": 8, "timeout": 30}


def test_the_factory_builds_the_real_chat_ollama(stub):
    assert isinstance(create_chat_model(llm(stub)), ChatOllama)


async def test_prompt_counts_from_ollamas_final_chunk_calibrate_the_next_requests(copilot, stub, admin, gns3_project):
    # The server counts more of its tokens than we estimate (a tokenizer and a chat template unlike
    # ours); it says so only in each answer's final chunk, as prompt_eval_count.
    first_count, second_count = 3000, 4200
    stub.enqueue(
        ollama_reply(tool_calls=[("gns3_topology", {})], prompt_eval_count=first_count, eval_count=12),
        ollama_reply("The lab is empty.", prompt_eval_count=second_count, eval_count=5),
    )
    project_id = gns3_project["project_id"]
    record, stream = await copilot.chat(admin, project_id, "what is in the lab?", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and text_of(seen) == "The lab is empty."
    assert [e["status"] for e in seen if e["type"] == "tool_end"] == ["success"]
    assert len(stub.requests) == 2 and all("tools" in r for r in stub.requests)
    assert stub.requests[0]["options"]["num_predict"] == 1000  # the reply's room at 8K, as Ollama names it
    first, second = [e["report"] for e in seen if e["type"] == "context"]
    assert first["token_scale"] == 1.0
    # The second request is prepared with the factor the first one's count taught (not clamped here).
    learned = first_count / first["total_tokens"]
    assert 0.75 < learned < 4.0
    assert second["token_scale"] == pytest.approx(clamp_token_scale(learned))
    assert second["server_tokens_estimate"] == pytest.approx(second["total_tokens"] * learned, abs=1)
    assert second["budget"] == int(6000 / learned)  # 8K balanced, in our tokens at that factor
    assert seen[-1]["usage"]["input_tokens"] == first_count + second_count  # the done event's

    # The next turn starts from both counts, averaged geometrically (smoothed over calls).
    stub.enqueue(ollama_reply("Still empty.", prompt_eval_count=100))
    _, stream = await copilot.chat(admin, project_id, "and now?", llm_config=llm(stub), session_id=record.session_id)
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    [third] = [e["report"] for e in seen if e["type"] == "context"]
    taught = second_count / second["total_tokens"]
    assert third["token_scale"] == pytest.approx(math.sqrt(learned * taught))
