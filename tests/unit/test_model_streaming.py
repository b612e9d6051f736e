"""Streamed answers read as the JSON the server sent (``agent/model/openai_wire.py``): the same
messages and errors as ``langchain-openai`` over the OpenAI SDK's chunk objects, on recorded streams.

Each recorded stream is served by an in-memory transport to two models with the same HTTP client:
the copilot's (``create_chat_model``, an OpenAI-compatible server and OpenAI itself) and plain
``ChatOpenAI`` (the SDK builds a ``ChatCompletionChunk`` per chunk), both read by the graph's own
model call (``stream_model``). The live stub's tests are in ``test_model_factory.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any
from unittest import mock

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from gns3server.agent.gns3_copilot.agent.model import calls
from gns3server.agent.gns3_copilot.agent.model import factory as model_factory
from gns3server.agent.gns3_copilot.agent.model.errors import provider_error
from tests.support.openai_stub import OpenAIStub, reply, tool_call

KEY = "sk-test-streaming-0123"
BASE_URL = "http://model.test.invalid/v1"
CHUNK = {"id": "chatcmpl-rec1", "object": "chat.completion.chunk", "created": 1733200000, "model": "rec-model",
         "system_fingerprint": "fp_rec"}


@tool
def get_topology(project_id: str) -> str:
    """Return the project's topology."""
    return project_id


@tool
def start_node(name: str) -> str:
    """Start a node by name."""
    return name


def _event(payload: dict[str, Any] | str) -> bytes:
    return b"data: " + (payload if isinstance(payload, str) else json.dumps(payload)).encode() + b"\n\n"


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return _event({**CHUNK, "choices": [choice], **extra})


USAGE = {"prompt_tokens": 812, "completion_tokens": 31, "total_tokens": 843,
         "prompt_tokens_details": {"cached_tokens": 640}, "completion_tokens_details": {"reasoning_tokens": 0}}

TEXT = [_chunk({"role": "assistant", "content": ""}, usage=None),
        *[_chunk({"content": piece}, usage=None) for piece in ("R1 and ", "R2 are ", "both ", "up, ", "é✓ 中文.")],
        _chunk({}, "stop", usage=None), _event({**CHUNK, "choices": [], "usage": USAGE}), _event("[DONE]")]

TOOL_CALLS = [
    _chunk({"role": "assistant", "content": "Checking "}), _chunk({"content": "both."}),
    _chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                            "function": {"name": "get_topology", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"project_'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id": "p-1"}'}}]}),
    _chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                            "function": {"name": "start_node", "arguments": '{"na'}}]}),
    _chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'me": "R1"}'}}]}),
    _chunk({"tool_calls": [{"index": 2, "id": "call_c", "type": "function",
                            "function": {"name": "start_node", "arguments": "name=R2"}}]}),  # not JSON
    _chunk({}, "tool_calls"), _event({**CHUNK, "choices": [], "usage": USAGE}), _event("[DONE]")]

# llama.cpp's server: reasoning deltas, its timings, usage on the finishing chunk, no system fingerprint.
LLAMA = [_event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}],
                 "created": 1, "id": "chatcmpl-ll", "model": "qwen", "object": "chat.completion.chunk"}),
         *[_event({"choices": [{"index": 0, "delta": {"reasoning_content": r}, "finish_reason": None}],
                   "id": "chatcmpl-ll", "model": "qwen", "object": "chat.completion.chunk"}) for r in ("Think", "ing")],
         *[_event({"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}],
                   "id": "chatcmpl-ll", "model": "qwen", "object": "chat.completion.chunk"}) for c in ("Done", ".")],
         _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "id": "chatcmpl-ll",
                 "model": "qwen", "object": "chat.completion.chunk",
                 "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
                 "timings": {"prompt_n": 20, "predicted_n": 4}}),
         _event("[DONE]")]

RECORDED = {"text": TEXT, "tool_calls": TOOL_CALLS, "llama_cpp": LLAMA}


class _Body(httpx.AsyncByteStream):
    """A response body sent a read at a time; ``fail`` is raised after the last part (a cut connection)."""

    def __init__(self, parts: list[bytes], fail: Exception | None = None) -> None:
        self._parts, self._fail = parts, fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part
        if self._fail is not None:
            raise self._fail


def _serving(parts: list[bytes], fail: Exception | None = None) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(parts, fail))

    return httpx.AsyncClient(transport=httpx.MockTransport(answer)), seen


def _models(client: httpx.AsyncClient, tools: bool, compatible: bool = True) -> dict[str, Any]:
    """The copilot's model and plain ``ChatOpenAI``, both on ``client``."""
    config: dict[str, Any] = {"model": "rec-model", "api_key": KEY, "context_limit": 128, "max_retries": 0,
                              "timeout": 30}
    if compatible:
        config["base_url"] = BASE_URL
    with mock.patch.object(model_factory, "_no_redirect_clients", return_value=(httpx.Client(), client)):
        ours = (model_factory.create_base_model_with_tools([get_topology, start_node], config) if tools
                else model_factory.create_chat_model(config))
    reference = ChatOpenAI(model="rec-model", api_key=SecretStr(KEY), base_url=BASE_URL, max_retries=0, timeout=30,
                           streaming=True, stream_usage=True, stream_chunk_timeout=30, http_async_client=client)
    theirs = reference.bind_tools([get_topology, start_node], tool_choice="auto") if tools else reference
    return {"ours": ours, "theirs": theirs}


async def _answer(model: Any) -> AIMessage | None:
    """The graph's model call (``stream_model``), its content events collected."""
    events: list[dict[str, Any]] = []
    with mock.patch.object(calls, "get_stream_writer", return_value=events.append):
        message = await calls.stream_model(model, [HumanMessage("status?")], {})
    if message is not None:
        message.additional_kwargs["__events"] = events
    return message


def _comparable(message: AIMessage | None) -> Any:
    if message is None:
        return None
    return {"content": message.content, "tool_calls": message.tool_calls,
            "invalid_tool_calls": message.invalid_tool_calls, "usage": message.usage_metadata,
            "response_metadata": message.response_metadata, "additional_kwargs": message.additional_kwargs}


@pytest.mark.parametrize("one_read", [False, True], ids=["a-read-per-event", "one-read"])
@pytest.mark.parametrize("compatible", [True, False], ids=["compatible-server", "openai"])
@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_a_recorded_stream_gives_the_message_chatopenai_gives(name: str, compatible: bool, one_read: bool) -> None:
    events = RECORDED[name]
    parts = [b"".join(events)] if one_read else events
    answers = {}
    for side in ("ours", "theirs"):
        client, _ = _serving(parts)
        answers[side] = _comparable(await _answer(_models(client, tools=name == "tool_calls",
                                                          compatible=compatible)[side]))
    assert answers["ours"] == answers["theirs"]
    assert answers["ours"] is not None and answers["ours"]["response_metadata"]["finish_reason"]
    if name == "tool_calls":  # what the recording carries, not only agreement
        assert [(c["id"], c["name"], c["args"]) for c in answers["ours"]["tool_calls"]] == [
            ("call_a", "get_topology", {"project_id": "p-1"}), ("call_b", "start_node", {"name": "R1"})]
        assert [c["id"] for c in answers["ours"]["invalid_tool_calls"]] == ["call_c"]
        assert answers["ours"]["usage"]["input_token_details"] == {"cache_read": 640}
    if name == "text":
        assert answers["ours"]["content"] == "R1 and R2 are both up, é✓ 中文."
        assert [e["content"] for e in answers["ours"]["additional_kwargs"]["__events"]] == [
            "R1 and ", "R2 are ", "both ", "up, ", "é✓ 中文."]


ERROR_EVENT = _event({"error": {"message": "The model crashed while answering.", "type": "server_error",
                                "code": "model_crashed"}})
FAILURES: dict[str, tuple[list[bytes], Callable[[], Exception] | None]] = {
    "error-object-mid-stream": ([*TEXT[:3], ERROR_EVENT], None),
    "connection-cut-mid-stream": (TEXT[:3], lambda: httpx.RemoteProtocolError("peer closed connection")),
    "read-error-mid-stream": (TEXT[:3], lambda: httpx.ReadError("connection reset")),
    "body-ends-without-finish": (TEXT[:3], None),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
async def test_a_stream_that_fails_midway_raises_what_chatopenai_raises(name: str) -> None:
    parts, failure = FAILURES[name]
    raised: dict[str, BaseException] = {}
    for side in ("ours", "theirs"):
        client, _ = _serving(parts, failure() if failure else None)
        with pytest.raises(Exception) as info:
            await _answer(_models(client, tools=False)[side])
        raised[side] = info.value
    ours, theirs = raised["ours"], raised["theirs"]
    assert type(ours) is type(theirs) and str(ours) == str(theirs)
    assert getattr(ours, "body", None) == getattr(theirs, "body", None)
    mapped = provider_error(ours)
    assert type(mapped) is type(provider_error(theirs))
    if name == "error-object-mid-stream":
        assert isinstance(ours, openai.APIError) and ours.body == {
            "message": "The model crashed while answering.", "type": "server_error", "code": "model_crashed"}


def _chunk_objects_built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The types the SDK builds streamed chunks into (recorded, then built as before)."""
    from openai import _base_client

    built: list[Any] = []
    original = _base_client.BaseClient._process_response_data

    def recorded(self: Any, *, data: object, cast_to: Any, response: Any) -> Any:
        built.append(cast_to)
        return original(self, data=data, cast_to=cast_to, response=response)

    monkeypatch.setattr(_base_client.BaseClient, "_process_response_data", recorded)
    return built


@pytest.mark.parametrize("compatible", [True, False], ids=["compatible-server", "openai"])
async def test_the_sdk_builds_no_chunk_object(monkeypatch: pytest.MonkeyPatch, compatible: bool) -> None:
    """The SDK built a ``ChatCompletionChunk`` per streamed chunk (then dumped back to a dict): now none."""
    from openai.types.chat import ChatCompletionChunk

    built = _chunk_objects_built(monkeypatch)
    client, _ = _serving(TOOL_CALLS)
    assert (await _answer(_models(client, tools=True, compatible=compatible)["ours"])) is not None
    assert len(built) == 10 and ChatCompletionChunk not in built  # each chunk passed as its decoded JSON
    built.clear()
    client, _ = _serving(TOOL_CALLS)
    await _answer(_models(client, tools=True)["theirs"])
    assert built.count(ChatCompletionChunk) == 10  # what the check would see on the SDK's own path


async def test_the_request_is_the_one_chatopenai_sends() -> None:
    """Same URL, body and the headers that matter (the SDK's client, key and options as they were)."""
    requests = {}
    for side in ("ours", "theirs"):
        client, seen = _serving(TEXT)
        await _answer(_models(client, tools=True)[side])
        requests[side] = seen[0]
    ours, theirs = requests["ours"], requests["theirs"]
    assert (ours.method, ours.url) == (theirs.method, theirs.url) == ("POST", BASE_URL + "/chat/completions")
    body, reference = json.loads(ours.content), json.loads(theirs.content)
    reference["max_tokens"] = reference.pop("max_completion_tokens", None) or body["max_tokens"]
    assert body == reference
    assert ours.headers["authorization"] == f"Bearer {KEY}"
    for header in ("content-type", "accept", "user-agent", "x-stainless-retry-count"):
        assert ours.headers.get(header) == theirs.headers.get(header)


async def test_a_live_stub_stream_keeps_usage_finish_and_tool_calls() -> None:
    async with OpenAIStub(api_key=KEY) as stub:
        stub.enqueue(reply("Both up.", tool_calls=[tool_call("start_node", {"name": "R1"}, id="call_1")],
                           usage=(321, 12), chunk_chars=2))
        config = {"model": "stub-model", "base_url": stub.base_url, "api_key": KEY, "context_limit": 128,
                  "max_retries": 0, "timeout": 30}
        message = await _answer(model_factory.create_base_model_with_tools([start_node], config))
    assert message is not None
    assert message.content == "Both up."
    assert [(c["id"], c["name"], c["args"]) for c in message.tool_calls] == [("call_1", "start_node", {"name": "R1"})]
    assert message.usage_metadata is not None
    assert (message.usage_metadata["input_tokens"], message.usage_metadata["output_tokens"]) == (321, 12)
    assert message.response_metadata["finish_reason"] == "tool_calls"
    assert message.response_metadata["model_name"] == "stub-model"
    assert stub.received[-1].headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("compatible", [True, False], ids=["compatible-server", "openai"])
async def test_the_body_is_joined_from_each_messages_own_json(monkeypatch: pytest.MonkeyPatch, compatible: bool) -> None:
    """The SDK encoded the whole body of every call (~10 ms at 500 turns): each message object's JSON
    is now encoded once and kept with it, and the SDK's encoder never sees the messages; the body
    decodes to the JSON ChatOpenAI sends for the same conversation."""
    from langchain_core.messages import ToolMessage
    from openai import _base_client

    from gns3server.agent.gns3_copilot.agent.model import openai_payload

    sdk_encoded: list[Any] = []
    original_dumps = _base_client.openapi_dumps
    monkeypatch.setattr(_base_client, "openapi_dumps", lambda obj: sdk_encoded.append(obj) or original_dumps(obj))
    encoded: list[int] = []
    original_encode = openai_payload.encode_json

    def counted(value: Any) -> bytes:
        encoded[-1] += 1
        return original_encode(value)

    monkeypatch.setattr(openai_payload, "encode_json", counted)
    client, seen = _serving(TEXT)
    theirs_client, theirs_seen = _serving(TEXT)
    built = _models(client, tools=True, compatible=compatible)
    reference = _models(theirs_client, tools=True)["theirs"]
    history: list[Any] = [HumanMessage("question 0 – é"), AIMessage("", tool_calls=[
        {"id": "c1", "name": "get_topology", "args": {"project_id": "p"}, "type": "tool_call"}]),
        ToolMessage("R1 R2 ✓", tool_call_id="c1", name="get_topology"), AIMessage("answer 0")]
    for n in range(3):
        history.append(HumanMessage(f"question {n + 1}"))
        encoded.append(0)
        request = [SystemMessage("You are the copilot."), *history]
        [chunk async for chunk in built["ours"].astream(request)]
        [chunk async for chunk in reference.astream(request)]
    assert encoded == [6, 2, 2]  # all at first; then the new question and the system prompt (a new object)
    ours_bodies = [json.loads(r.content) for r in seen]
    theirs_bodies = [json.loads(r.content) for r in theirs_seen]
    assert len(ours_bodies) == len(theirs_bodies) == 3
    assert len(sdk_encoded) == 3  # only the reference's bodies went through the SDK's encoder
    for mine, reference_body in zip(ours_bodies, theirs_bodies, strict=True):
        for body in (mine, reference_body):  # the reply limit: ours from the config, the reference none
            body.pop("max_tokens", None), body.pop("max_completion_tokens", None)
        if compatible:  # what the compatible class sends differently, on purpose: "" for a null content
            reference_body["messages"] = [{**m, "content": "" if m["content"] is None else m["content"]}
                                          for m in reference_body["messages"]]
        assert mine == reference_body


def test_a_joined_body_is_the_sdks_own_encoding_byte_for_byte() -> None:
    from openai._utils._json import openapi_dumps

    from gns3server.agent.gns3_copilot.agent.model.openai_wire import EncodedMessages, encode_json, request_body

    dicts = [{"role": "system", "content": "Tu es « copilote » ✓ 中文\n\t\"quoted\" \\ \u2028"},
             {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                 "name": "get_topology", "arguments": "{\"project_id\": \"p-1\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "R1 1.5e-3 \u0000"}]}]
    tools = [{"type": "function", "function": {"name": "get_topology", "parameters": {"type": "object"}}}]
    params = {"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True},
              "temperature": 0.25, "max_tokens": 2048, "tool_choice": "auto", "stop": None, "timeout": 5,
              "extra_body": {"messages": EncodedMessages(dicts, [encode_json(d) for d in dicts]), "tools": tools}}
    sdk = {**{k: v for k, v in params.items() if k not in ("extra_body", "timeout")},
           "messages": dicts, "tools": tools}
    assert request_body(params) == openapi_dumps(sdk)
    assert request_body({**params, "extra_body": {"messages": dicts}}) is None  # not pre-encoded: the SDK encodes


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON_VALUES)
def test_a_value_is_encoded_as_json_dumps_encodes_it_or_refused_as_it_refuses(value: Any) -> None:
    """The encoder set up once gives json.dumps's bytes (SDK settings) for any JSON value, and its
    error for what it refuses (NaN and infinities)."""
    from gns3server.agent.gns3_copilot.agent.model.openai_wire import encode_json

    try:
        expected: bytes | type[Exception] = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                                                       allow_nan=False).encode()
    except ValueError:
        expected = ValueError
    if expected is ValueError:
        with pytest.raises(ValueError, match="JSON compliant"):
            encode_json(value)
    else:
        assert encode_json(value) == expected


def test_what_json_cannot_encode_is_refused_as_json_dumps_refuses_it() -> None:
    from gns3server.agent.gns3_copilot.agent.model.openai_wire import encode_json

    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        encode_json({"messages": circular})
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode_json({"content": object()})
    assert encode_json({"a": [1]}) == b'{"a":[1]}'  # an earlier refusal left nothing behind


def test_without_a_c_encoder_the_same_bytes_and_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    from gns3server.agent.gns3_copilot.agent.model import openai_wire

    monkeypatch.setattr(openai_wire, "c_make_encoder", None)  # a Python built without _json
    openai_wire._json_encoder.cache_clear()
    try:
        value = {"role": "tool", "content": "R1 « up » 中文 \u2028", "n": [1, 2.5e-3, None, True]}
        assert openai_wire.encode_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                                                            allow_nan=False).encode()
        with pytest.raises(ValueError, match="JSON compliant"):
            openai_wire.encode_json({"x": float("nan")})
    finally:
        openai_wire._json_encoder.cache_clear()  # the next caller builds the C one again


async def test_an_unstreamed_call_sends_the_joined_body_and_gets_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a server that cannot stream tool calls the model is called unstreamed: its body is joined
    the same way, and its answer is ChatOpenAI's."""
    from openai import _base_client

    sdk_encoded: list[Any] = []
    original_dumps = _base_client.openapi_dumps
    monkeypatch.setattr(_base_client, "openapi_dumps", lambda obj: sdk_encoded.append(obj) or original_dumps(obj))
    completion = {**CHUNK, "object": "chat.completion", "usage": USAGE, "choices": [{
        "index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
            "role": "assistant", "content": "Checking.", "tool_calls": [{"id": "call_a", "type": "function", "function": {
                "name": "get_topology", "arguments": '{"project_id": "p-1"}'}}]}}]}
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    config = {"model": "rec-model", "api_key": KEY, "base_url": BASE_URL, "context_limit": 128, "max_retries": 0}
    with mock.patch.object(model_factory, "_no_redirect_clients", return_value=(httpx.Client(), client)):
        ours = model_factory.create_base_model_with_tools([get_topology], config, stream=False)
    theirs = ChatOpenAI(model="rec-model", api_key=SecretStr(KEY), base_url=BASE_URL, max_retries=0,
                        http_async_client=client).bind_tools([get_topology], tool_choice="auto")
    answers = [await model.ainvoke([HumanMessage("where?")]) for model in (ours, theirs)]
    assert len(sdk_encoded) == 1  # the reference's body only
    mine, reference = (json.loads(r.content) for r in seen)
    assert "stream" not in mine or mine["stream"] is False
    mine.pop("max_tokens"), mine.pop("stream", None), reference.pop("stream", None)
    assert mine == reference
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    first, second = answers
    assert (first.content, first.tool_calls, first.usage_metadata, first.response_metadata["finish_reason"]) == (
        second.content, second.tool_calls, second.usage_metadata, "tool_calls")


class _Silent(httpx.AsyncByteStream):
    """Two chunks, then silence until the test ends (no network read timeout: only the chunk bound can end it)."""

    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts
        self.stop = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part
        await self.stop.wait()


@pytest.mark.parametrize("compatible", [True, False], ids=["compatible-server", "openai"])
async def test_a_stream_silent_between_chunks_ends_as_chatopenai_ends_it(compatible: bool) -> None:
    """The wait for each chunk is bounded by the stream itself (no task per chunk), with the error
    langchain-openai raises: the same type, message and count of chunks received."""
    from langchain_openai import StreamChunkTimeoutError

    raised: dict[str, BaseException] = {}
    for side in ("ours", "theirs"):
        body = _Silent(TEXT[:3])
        client = httpx.AsyncClient(transport=httpx.MockTransport(
            lambda request, body=body: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)))
        config: dict[str, Any] = {"model": "rec-model", "api_key": KEY, "context_limit": 128, "max_retries": 0,
                                  "timeout": 0.5}
        if compatible:
            config["base_url"] = BASE_URL
        with mock.patch.object(model_factory, "_no_redirect_clients", return_value=(httpx.Client(), client)):
            ours = model_factory.create_chat_model(config)
        if not compatible:  # OpenAI itself: langchain-openai's default bound, made short here
            ours.async_client.chunk_timeout = 0.5
        theirs = ChatOpenAI(model="rec-model", api_key=SecretStr(KEY), base_url=BASE_URL, max_retries=0,
                            streaming=True, stream_usage=True, stream_chunk_timeout=0.5, http_async_client=client)
        try:
            with pytest.raises(StreamChunkTimeoutError) as info:
                await _answer(ours if side == "ours" else theirs)
        finally:
            body.stop.set()
        raised[side] = info.value
    ours_error, theirs_error = raised["ours"], raised["theirs"]
    assert str(ours_error) == str(theirs_error) and ours_error.chunks_received == theirs_error.chunks_received == 3
    assert type(provider_error(ours_error)) is type(provider_error(theirs_error))


@pytest.mark.parametrize("compatible", [True, False], ids=["compatible-server", "openai"])
async def test_no_task_is_started_per_chunk(monkeypatch: pytest.MonkeyPatch, compatible: bool) -> None:
    """langchain-openai bounded each chunk's wait with ``asyncio.wait_for`` (a task per chunk on 3.11)."""
    waits: list[Any] = []
    original = asyncio.wait_for

    async def counted(awaitable: Any, timeout: float | None) -> Any:
        waits.append(timeout)
        return await original(awaitable, timeout)

    monkeypatch.setattr(asyncio, "wait_for", counted)
    client, _ = _serving(TOOL_CALLS)
    assert await _answer(_models(client, tools=True, compatible=compatible)["ours"]) is not None
    assert waits == []
    client, _ = _serving(TOOL_CALLS)
    await _answer(_models(client, tools=True)["theirs"])
    assert len(waits) == 11  # what the count sees on langchain-openai's own bound: 10 chunks and the end


class _Tokens(AsyncCallbackHandler):
    """A callback handler (a tracer would be one): sees the call start and every token."""

    def __init__(self) -> None:
        self.started = 0
        self.tokens: list[str] = []

    async def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.started += 1

    async def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


def _astream_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times LangChain's ``BaseChatModel.astream`` ran (counted, then run as before)."""
    from langchain_core.language_models.chat_models import BaseChatModel

    ran: list[int] = []
    original = BaseChatModel.astream

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        ran.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BaseChatModel, "astream", counted)
    return ran


@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_with_nothing_tracing_the_call_the_stream_is_read_without_astream(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """No handler: the provider's chunks are read directly, and give the message (and id) astream gives."""
    ran = _astream_calls(monkeypatch)
    client, _ = _serving(RECORDED[name])
    message = await _answer(_models(client, tools=name == "tool_calls")["ours"])
    assert ran == []
    ran_theirs = _astream_calls(monkeypatch)
    client, _ = _serving(RECORDED[name])
    reference = await _answer(_models(client, tools=name == "tool_calls")["theirs"])
    assert ran_theirs == [1]
    assert message is not None and reference is not None
    assert _comparable(message) == _comparable(reference)
    assert message.id is not None and message.id.startswith("lc_run--") and len(message.id) == len(reference.id or "")
    assert message.id != reference.id


async def test_a_callback_handler_in_the_config_gets_the_call_through_astream(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _astream_calls(monkeypatch)
    handler = _Tokens()
    client, _ = _serving(TEXT)
    events: list[dict[str, Any]] = []
    with mock.patch.object(calls, "get_stream_writer", return_value=events.append):
        message = await calls.stream_model(_models(client, tools=False)["ours"], [HumanMessage("status?")],
                                           {"callbacks": [handler]})
    assert ran == [1] and handler.started == 1
    assert "".join(handler.tokens) == "R1 and R2 are both up, é✓ 中文."
    assert message is not None and message.content == "R1 and R2 are both up, é✓ 中文."


async def test_a_tracer_switched_on_for_the_context_gets_the_call_through_astream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tracing switched on around the call (as ``tracing_v2_enabled()`` or LangSmith's environment
    variables do, through the same callback configuration): the call goes through astream, the tracer sees it."""
    from langchain_core.tracers.context import tracing_v2_callback_var

    ran = _astream_calls(monkeypatch)
    tracer = _Tokens()
    token = tracing_v2_callback_var.set(tracer)  # type: ignore[arg-type]
    try:
        client, _ = _serving(TEXT)
        message = await _answer(_models(client, tools=False)["ours"])
    finally:
        tracing_v2_callback_var.reset(token)
    assert ran == [1] and tracer.started == 1
    assert message is not None and message.content == "R1 and R2 are both up, é✓ 中文."


async def test_content_that_is_not_plain_text_goes_through_astream(monkeypatch: pytest.MonkeyPatch) -> None:
    """Content blocks are normalised by astream before they are sent: such a request is left to it."""
    ran = _astream_calls(monkeypatch)
    client, _ = _serving(TEXT)
    events: list[dict[str, Any]] = []
    with mock.patch.object(calls, "get_stream_writer", return_value=events.append):
        message = await calls.stream_model(_models(client, tools=False)["ours"],
                                           [HumanMessage([{"type": "text", "text": "status?"}])], {})
    assert ran == [1]
    assert message is not None and message.content == "R1 and R2 are both up, é✓ 中文."


async def test_a_message_replaced_at_its_place_by_content_blocks_goes_through_astream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether a request is plain text is kept by place for the conversation's next call: a message
    replaced at its place (here by content blocks) is read again, and the call left to astream."""
    from gns3server.agent.gns3_copilot.agent.model import openai_payload

    ran = _astream_calls(monkeypatch)
    read: list[int] = []
    plain_text = openai_payload._plain_text
    monkeypatch.setattr(openai_payload, "_plain_text", lambda messages: read.append(len(messages)) or plain_text(messages))
    client, seen = _serving(TEXT)
    model = _models(client, tools=False)["ours"]
    question, answer, follow = HumanMessage("status?"), AIMessage("all up"), HumanMessage("and R2?")

    async def call(*messages: Any) -> AIMessage | None:
        with mock.patch.object(calls, "get_stream_writer", return_value=[].append):
            return await calls.stream_model(model, [SystemMessage("You are the copilot."), *messages], {})

    assert await call(question, answer, follow) is not None
    assert ran == []
    assert await call(question, AIMessage([{"type": "text", "text": "all up"}]), follow) is not None
    assert ran == [1]
    assert await call(question, answer, follow, AIMessage("up"), HumanMessage("R3?")) is not None
    assert ran == [1] and len(seen) == 3
    assert read == [4, 2, 4]  # all; the system prompt and the replaced one; those two again and the two new
