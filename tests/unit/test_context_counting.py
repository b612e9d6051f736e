"""Message and tool accounting against the OpenAI cookbook's API-reported figures."""

from __future__ import annotations

import gc
import logging
import tracemalloc

import pydantic
import pydantic.v1
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.tools import tool

from gns3server.agent.gns3_copilot.agent.context.counting import (
    IMAGE_TOKENS,
    REPLY_PRIMING_TOKENS,
    TokenCounter,
    message_key,
    tool_call_id_of,
)
from gns3server.agent.gns3_copilot.agent.context_manager import count_tokens, estimate_tool_tokens

# "How to count tokens with tiktoken" (OpenAI cookbook): the example conversation and
# the prompt tokens the API reported for it.
COOKBOOK_MESSAGES = [
    SystemMessage(
        "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."
    ),
    SystemMessage("New synergies will help drive top-line growth.", name="example_user"),
    SystemMessage("Things working well together will increase revenue.", name="example_assistant"),
    SystemMessage(
        "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
        name="example_user",
    ),
    SystemMessage("Let's talk later when we're less busy about how to do better.", name="example_assistant"),
    HumanMessage("This late pivot means we don't have time to boil the ocean for the client deliverable."),
]
COOKBOOK_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
COOKBOOK_TOOL_MESSAGES = [
    SystemMessage("You are a helpful assistant that can answer to questions about the weather."),
    HumanMessage("What's the weather like in San Francisco?"),
]


@pytest.mark.parametrize(("encoding", "api_total"), [("cl100k_base", 129), ("o200k_base", 124)])
def test_cookbook_conversation_matches_api(encoding, api_total):
    assert TokenCounter(encoding).messages(COOKBOOK_MESSAGES) == api_total


@pytest.mark.parametrize(("encoding", "api_total"), [("cl100k_base", 105), ("o200k_base", 101)])
def test_tool_estimate_never_undercounts_cookbook(encoding, api_total):
    counter = TokenCounter(encoding)
    tools_share = api_total - counter.messages(COOKBOOK_TOOL_MESSAGES)
    estimate = estimate_tool_tokens([COOKBOOK_TOOL], encoding)
    assert tools_share <= estimate <= 3 * tools_share


def test_count_tokens_is_the_seed_function():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    # Special-token look-alikes in user text are text, never an error.
    assert count_tokens("<|endoftext|>") == 7
    assert count_tokens("路由器 R1 的接口") > 0


def test_message_framing_role_and_name():
    counter = TokenCounter()
    plain = counter.message(HumanMessage("hello world"))
    assert plain == 3 + 1 + 2  # framing, "user", content
    named = counter.message(HumanMessage("hello world", name="alice"))
    assert named == plain + 1 + count_tokens("alice")


def test_tool_calls_and_results_are_counted():
    counter = TokenCounter()
    bare = AIMessage("")
    call = AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {"project_id": "abc"}, "id": "call_1"}])
    expected_call = 3 + count_tokens("gns3_topology") + count_tokens('{"project_id": "abc"}')
    assert counter.message(call) - counter.message(bare) == expected_call
    two = AIMessage(
        "",
        tool_calls=[
            {"name": "gns3_topology", "args": {"project_id": "abc"}, "id": "call_1"},
            {"name": "gns3_topology", "args": {"project_id": "abc"}, "id": "call_2"},
        ],
    )
    assert counter.message(two) - counter.message(bare) == 2 * expected_call
    result = ToolMessage("R1 up", tool_call_id="call_1")
    assert counter.message(result) == 3 + count_tokens("tool") + count_tokens("R1 up") + count_tokens("call_1")
    invalid = AIMessage("", invalid_tool_calls=[{"name": "x", "args": "{oops", "id": "c", "error": None}])
    assert counter.message(invalid) > counter.message(bare)


def test_list_content_blocks():
    counter = TokenCounter()
    text_only = HumanMessage([{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}])
    assert counter.content(text_only.content) == count_tokens("hello") + count_tokens(" world")
    with_image = HumanMessage(
        [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "data:..."}}]
    )
    assert counter.content(with_image.content) == count_tokens("what is this") + IMAGE_TOKENS
    other = HumanMessage([{"type": "file", "id": "f1"}])
    assert counter.content(other.content) == count_tokens('{"type": "file", "id": "f1"}')


def test_request_adds_reply_priming():
    counter = TokenCounter()
    msgs = [HumanMessage("a"), AIMessage("b")]
    assert counter.messages(msgs) == counter.message(msgs[0]) + counter.message(msgs[1]) + REPLY_PRIMING_TOKENS
    assert counter.messages([]) == REPLY_PRIMING_TOKENS


def test_cache_is_by_content_not_identity(monkeypatch):
    counter = TokenCounter()
    calls = []
    real = counter._count_uncached
    monkeypatch.setattr(counter, "_count_uncached", lambda m: calls.append(m) or real(m))
    first = counter.message(HumanMessage("show ip interface brief"))
    again = counter.message(HumanMessage("show ip interface brief"))  # a new, equal object
    assert first == again and len(calls) == 1
    counter.message(HumanMessage("show ip interface brief", name="bob"))
    counter.message(AIMessage("show ip interface brief"))
    assert len(calls) == 3


def test_cache_is_bounded():
    counter = TokenCounter(cache_size=10)
    for i in range(50):
        counter.message(HumanMessage(f"message {i}"))
    assert counter.cache_info()[0] == 10


def test_cache_is_bounded_by_the_size_of_the_texts_it_keeps():
    # Long tool outputs: a few entries fill the byte budget long before the entry cap.
    counter = TokenCounter(cache_bytes=100_000)
    outputs = [ToolMessage(f"{i} " + "x" * 30_000, tool_call_id=f"t{i}") for i in range(20)]
    counts = [counter.message(m) for m in outputs]
    entries, size = counter.cache_info()
    assert entries == 3 and 90_000 < size <= 100_000
    # The most recent ones are kept (LRU): counting them again needs no encoding.
    counter.encoding = None  # any encoding now would fail
    assert [counter.message(m) for m in outputs[-3:]] == counts[-3:]


@pytest.mark.parametrize(
    "text",
    ["路由器接口状态正常" * 1200, "🔌📡" * 2500, "interface réseau é" * 600, "show ip interface brief " * 900],
    ids=["CJK", "emoji", "Latin-1", "ASCII"],
)
def test_the_byte_bound_is_the_memory_the_kept_texts_take(text: str):
    """Measured from outside (tracemalloc), once the messages are gone: a non-ASCII string takes 2 or 4
    bytes per character, plus the UTF-8 copy encoding it made, not one per character."""
    bound = 1_000_000
    counter = TokenCounter(cache_bytes=bound)  # the encoding loaded before tracing
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(60):
            counter.message(HumanMessage(f"{i} {text}"))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    entries, size = counter.cache_info()
    assert held <= size <= bound  # what the cache counts covers what it holds, within the bound
    assert size > bound - held / entries * 2  # and it is full: the bound is not wasted by over-counting
    assert entries < 60  # some were dropped for it


def test_a_text_bigger_than_the_whole_cache_is_counted_and_not_kept():
    counter = TokenCounter(cache_bytes=10_000)
    small = HumanMessage("show ip route")
    counter.message(small)
    assert counter.message(HumanMessage("y" * 50_000)) > 6_000
    assert counter.cache_info()[0] == 1  # the small entry was not evicted for it


class _V2Args(pydantic.BaseModel):
    """Start a node."""

    node: str = pydantic.Field(description="node name")


class _V1Args(pydantic.v1.BaseModel):
    """Start a node."""

    node: str = pydantic.v1.Field(description="node name")


@tool
def start_node(node: str) -> str:
    """Start a node by name."""
    return node


def test_tool_schema_kinds():
    counter = TokenCounter()
    for kind in (start_node, _V2Args, COOKBOOK_TOOL, COOKBOOK_TOOL["function"]):
        assert 10 < counter.tools([kind]) < 400
    assert counter.tools([start_node, _V2Args]) == counter.tools([start_node]) + counter.tools([_V2Args])
    assert estimate_tool_tokens([]) == 0


def test_pydantic_v1_models_are_counted():
    assert 10 < TokenCounter().tools([_V1Args]) < 400


def test_unreadable_tool_falls_back_to_1000(caplog):
    caplog.set_level(logging.WARNING)
    assert estimate_tool_tokens([object()]) == 1000
    assert "Cannot estimate tokens of tool object" in caplog.text
    assert estimate_tool_tokens([object(), start_node]) == 1000 + estimate_tool_tokens([start_node])


@pytest.mark.parametrize("message", [
    ToolMessage("out", tool_call_id="c1"),
    HumanMessage("q", tool_call_id="an extra one"),  # an extra field, as a message accepts any
    AIMessage("a"),
    HumanMessage("q"),
    ChatMessage("c", role="planner"),
    ToolMessageChunk(content="part", tool_call_id="c2"),
], ids=lambda m: type(m).__name__)
def test_a_messages_tool_call_id_is_what_getattr_gives(message: BaseMessage) -> None:
    assert tool_call_id_of(message) == getattr(message, "tool_call_id", None)


def test_counting_a_message_without_a_call_id_raises_nothing_inside_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing attribute look-up on a pydantic message raises inside its ``__getattr__`` (~2 us a message):
    a history read back after a restart is counted without one."""
    missed: list[str] = []
    real = pydantic.BaseModel.__getattr__

    def recorded(self: pydantic.BaseModel, name: str) -> object:
        missed.append(name)
        return real(self, name)

    monkeypatch.setattr(pydantic.BaseModel, "__getattr__", recorded)
    history = [SystemMessage("s"), HumanMessage("q"), AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c"}]),
               ToolMessage("out", tool_call_id="c"), AIMessage("a")]
    counter = TokenCounter()
    assert all(counter.message(m) > 0 for m in history)
    assert [message_key(m) for m in history]
    assert missed == []


_texts = st.text(max_size=20)
_any_message = st.one_of(
    st.builds(HumanMessage, content=_texts | st.lists(st.builds(lambda t: {"type": "text", "text": t}, _texts), max_size=2),
              name=st.none() | _texts),
    st.builds(SystemMessage, content=_texts, name=st.none() | _texts),
    st.builds(ToolMessage, content=_texts, tool_call_id=_texts, name=st.none() | _texts),
    st.builds(AIMessage, content=_texts, tool_calls=st.lists(st.builds(
        lambda n, i: {"name": n, "args": {"k": n}, "id": i, "type": "tool_call"}, _texts, _texts), max_size=2)),
    st.builds(ChatMessage, content=_texts, role=_texts),
    st.builds(ToolMessageChunk, content=_texts, tool_call_id=_texts),
)


@given(_any_message)
def test_a_text_messages_key_made_directly_is_the_general_one(message: BaseMessage) -> None:
    from gns3server.agent.gns3_copilot.agent.context import counting

    general = (counting.role_of(message), counting._content_key(message.content), message.name,
               tuple(counting._tool_calls(message)), tool_call_id_of(message))
    assert message_key(message) == general
