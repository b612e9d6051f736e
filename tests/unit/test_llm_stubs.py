"""The two LLM test doubles: ScriptedChatModel and OpenAIStub."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
)
from langchain_core.tools import tool

from tests.support.openai_stub import (
    OpenAIStub,
    context_length_exceeded,
    hang,
    rate_limited,
    reply,
    tool_call,
)
from tests.support.scripted_model import (
    ScriptedChatModel,
    ScriptedResponse,
    ScriptExhaustedError,
)

USAGE = {"input_tokens": 120, "output_tokens": 8, "total_tokens": 128}
CALLS = [
    {"name": "start_node", "args": {"name": "R1"}, "id": "call_1", "type": "tool_call"},
    {"name": "start_node", "args": {"name": "R2"}, "id": "call_2", "type": "tool_call"},
]


@tool
def start_node(name: str) -> str:
    """Start a node by name."""
    return name


# ------------------------------------------------------------ ScriptedChatModel


async def test_answers_in_queue_order_and_records_calls() -> None:
    model = ScriptedChatModel()
    model.enqueue("first", AIMessage("second"))
    assert (await model.ainvoke([HumanMessage("a")])).content == "first"
    assert model.invoke([SystemMessage("sys"), HumanMessage("b")]).content == "second"
    assert [[m.content for m in call] for call in model.calls] == [["a"], ["sys", "b"]]
    assert model.pending == 0


async def test_tool_calls_and_usage_are_returned() -> None:
    model = ScriptedChatModel()
    model.enqueue(AIMessage("", tool_calls=CALLS, usage_metadata=USAGE))
    result = await model.ainvoke("go")
    assert result.tool_calls == CALLS
    assert result.usage_metadata == USAGE


async def test_streaming_splits_text_and_tool_calls_with_usage_last() -> None:
    model = ScriptedChatModel(chunk_chars=3)
    model.enqueue(AIMessage("Starting both.", tool_calls=CALLS, usage_metadata=USAGE))
    chunks = [chunk async for chunk in model.astream("go")]
    texts = [str(c.content) for c in chunks if c.content]
    assert len(texts) == 5 and "".join(texts) == "Starting both."
    call_chunks = [tc for c in chunks for tc in c.tool_call_chunks]
    assert len(call_chunks) == 4  # two pieces per call
    assert {tc["index"] for tc in call_chunks} == {0, 1}
    assert [c.usage_metadata for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1].usage_metadata == USAGE
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert isinstance(merged, AIMessageChunk)
    assert [(c["id"], c["name"], c["args"]) for c in merged.tool_calls] == [
        ("call_1", "start_node", {"name": "R1"}),
        ("call_2", "start_node", {"name": "R2"}),
    ]


async def test_invoke_through_the_streaming_path_rebuilds_the_message() -> None:
    model = ScriptedChatModel(streaming=True)
    model.enqueue(AIMessage("Done.", tool_calls=CALLS, usage_metadata=USAGE))
    result = await model.ainvoke("go")
    assert result.content == "Done."
    assert [c["args"] for c in result.tool_calls] == [{"name": "R1"}, {"name": "R2"}]
    assert result.usage_metadata is not None and result.usage_metadata["input_tokens"] == 120


async def test_bind_tools_shares_the_queue_and_records_tools() -> None:
    model = ScriptedChatModel()
    bound = model.bind_tools([start_node])
    model.enqueue("via bound", "via bare")
    assert (await bound.ainvoke("x")).content == "via bound"
    assert (await model.ainvoke("y")).content == "via bare"
    assert model.bound_tools == [[start_node]]
    assert model.call_tools[0] is not None and model.call_tools[0][0]["function"]["name"] == "start_node"
    assert model.call_tools[1] is None


async def test_scripted_exception_is_raised_in_order() -> None:
    model = ScriptedChatModel()
    model.enqueue(TimeoutError("provider timed out"), "after", ConnectionError("reset"))
    with pytest.raises(TimeoutError, match="provider timed out"):
        await model.ainvoke("x")
    assert model.invoke("y").content == "after"
    with pytest.raises(ConnectionError, match="reset"):
        async for _ in model.astream("z"):
            pass
    assert len(model.calls) == 3


async def test_empty_queue_is_a_clear_error() -> None:
    model = ScriptedChatModel()
    with pytest.raises(ScriptExhaustedError, match=r"no scripted response left for call #1 .*'where is R1\?'"):
        await model.ainvoke([HumanMessage("where is R1?")])
    assert len(model.calls) == 1


def test_enqueue_rejects_what_it_cannot_answer() -> None:
    with pytest.raises(TypeError):
        ScriptedChatModel().enqueue(42)  # type: ignore[arg-type]


async def test_gate_holds_the_answer_until_released() -> None:
    model = ScriptedChatModel()
    gate = asyncio.Event()
    (item,) = model.enqueue(ScriptedResponse("released", gate=gate))
    task = asyncio.create_task(model.ainvoke("x"))
    await item.started.wait()
    assert not task.done()
    gate.set()
    assert (await task).content == "released"


async def test_gate_lets_a_test_cancel_mid_call() -> None:
    model = ScriptedChatModel()
    (item,) = model.enqueue(ScriptedResponse("never", gate=asyncio.Event()))
    task = asyncio.create_task(model.ainvoke("x"))
    await item.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    model.enqueue("next run")
    assert (await model.ainvoke("y")).content == "next run"


async def test_gate_after_chunks_stops_mid_stream() -> None:
    model = ScriptedChatModel(chunk_chars=2)
    gate = asyncio.Event()
    (item,) = model.enqueue(ScriptedResponse("abcdef", gate=gate, gate_after=2))
    received: list[str] = []

    async def consume() -> None:
        async for chunk in model.astream("x"):
            received.append(str(chunk.content))

    task = asyncio.create_task(consume())
    await item.started.wait()
    assert received == ["ab", "cd"]
    gate.set()
    await task
    assert "".join(received) == "abcdef"


def test_sync_call_of_a_gated_response_is_refused() -> None:
    model = ScriptedChatModel()
    model.enqueue(ScriptedResponse("x", gate=asyncio.Event()))
    with pytest.raises(TypeError, match="async"):
        model.invoke("x")


# -------------------------------------------------------------------- OpenAIStub


async def test_non_streaming_completion_shape() -> None:
    async with OpenAIStub() as stub:
        stub.enqueue(
            reply("Two calls.", tool_calls=[tool_call("a", {"x": 1}), tool_call("b", "{not json")], usage=(10, 3))
        )
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        completion = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        await client.close()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Two calls."
    calls = [c for c in choice.message.tool_calls or [] if c.type == "function"]
    assert [(c.function.name, c.function.arguments) for c in calls] == [("a", json.dumps({"x": 1})), ("b", "{not json")]
    assert len({c.id for c in calls}) == 2
    assert completion.usage is not None and completion.usage.total_tokens == 13


async def test_stream_without_include_usage_has_no_usage_chunk() -> None:
    async with OpenAIStub() as stub:
        stub.enqueue("hello world")
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
        await client.close()
    assert [c.usage for c in chunks] == [None] * len(chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "hello world"
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_models_and_api_key_check() -> None:
    async with OpenAIStub(api_key="sk-right", models=("qwen", "llama")) as stub:
        good = openai.AsyncOpenAI(base_url=stub.base_url, api_key="sk-right", max_retries=0)
        bad = openai.AsyncOpenAI(base_url=stub.base_url, api_key="sk-wrong", max_retries=0)
        assert [m.id async for m in good.models.list()] == ["qwen", "llama"]
        with pytest.raises(openai.AuthenticationError) as info:
            await bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert info.value.code == "invalid_api_key"
        await good.close()
        await bad.close()
    assert stub.requests == [{"model": "m", "messages": [{"role": "user", "content": "x"}]}]
    assert stub.pending == 0


async def test_fault_shapes() -> None:
    async with OpenAIStub() as stub:
        stub.enqueue(rate_limited(retry_after=2.5), context_length_exceeded(limit=4096, requested=5000))
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.BadRequestError) as too_long:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        await client.close()
    assert limited.value.response.headers["retry-after"] == "3"
    assert limited.value.response.headers["retry-after-ms"] == "2500"
    assert too_long.value.body == {
        "message": "This model's maximum context length is 4096 tokens. However, your messages resulted in "
        "5000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }


async def test_exhausted_script_is_a_clear_unretried_error() -> None:
    async with OpenAIStub() as stub:
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=3)
        with pytest.raises(openai.BadRequestError, match="no scripted response left for request #1"):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        await client.close()
    assert stub.unscripted == 1 and len(stub.requests) == 1


async def test_stop_wakes_a_hung_request() -> None:
    stub = await OpenAIStub().start()
    stub.enqueue(hang())
    client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0, timeout=60)
    task = asyncio.create_task(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}]))
    await stub.wait_for_requests(1)
    assert not task.done()
    await stub.stop()
    with pytest.raises(openai.APIStatusError) as info:
        await task
    assert info.value.status_code == 504
    await client.close()


def test_in_thread_serves_a_blocking_client() -> None:
    with OpenAIStub.in_thread(api_key="sk-thread") as stub:
        stub.enqueue(reply("from the thread", usage=(5, 2)))
        client = openai.OpenAI(base_url=stub.base_url, api_key="sk-thread", max_retries=0)
        completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        client.close()
    assert completion.choices[0].message.content == "from the thread"
    assert len(stub.requests) == 1


async def test_in_thread_hold_and_release_from_the_test_loop() -> None:
    with OpenAIStub.in_thread() as stub:
        stub.enqueue(reply("abcdefgh", chunk_chars=2, hold_after=1))
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        first = await anext(aiter(stream))
        assert first.choices[0].delta.content == "ab"
        await stub.wait_for_requests(1)
        stub.release()
        rest = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        await client.close()
    assert "ab" + "".join(rest) == "abcdefgh"


def test_enqueue_rejects_unknown_items() -> None:
    with pytest.raises(TypeError):
        OpenAIStub().enqueue(AIMessage("no"))  # type: ignore[arg-type]
