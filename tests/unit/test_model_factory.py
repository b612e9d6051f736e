"""Model factory: config validation, redaction, and the real ChatOpenAI against the OpenAI stub."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any, cast

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.chat_models import base as chat_models_base
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from gns3server.agent.gns3_copilot.agent.context.tokenizer import ENCODING_SPECS
from gns3server.agent.gns3_copilot.agent.context_manager import (
    CONTEXT_STRATEGY_RATIOS,
    resolve_budget,
    resolve_window_settings,
)
from gns3server.agent.gns3_copilot.agent.model import factory as model_factory
from gns3server.agent.gns3_copilot.agent.model.config import (
    LLMConfigError,
    llm_config_schema,
    redact_config,
    validate_llm_config,
)
from gns3server.agent.gns3_copilot.agent.model.errors import LLMTimeoutError, is_context_length_error, provider_error
from gns3server.agent.gns3_copilot.agent.model.factory import create_base_model_with_tools, create_chat_model
from tests.support.openai_stub import (
    OpenAIStub,
    context_length_exceeded,
    hang,
    rate_limited,
    reply,
    server_error,
    tool_call,
)

SECRET = "sk-proj-SECRETSECRET1234abcd"
BASE = {"model": "gpt-4o-mini", "context_limit": 128, "api_key": SECRET}


@tool
def get_topology(project_id: str) -> str:
    """Return the project's topology."""
    return project_id


@tool
def start_node(name: str, wait: bool = False) -> str:
    """Start a node by name."""
    return name


# ------------------------------------------------------------------ validation


BAD_VALUES = [
    ("name", ""),
    ("name", 7),
    ("provider", "azure"),
    ("provider", None),
    ("model", ""),
    ("model", "   "),
    ("model", 42),
    ("base_url", "localhost:11434"),
    ("base_url", "ftp://example.com/v1"),
    ("base_url", "http://"),
    ("base_url", "http://host with space/v1"),
    ("api_key", ""),
    ("api_key", 12345),
    ("temperature", -0.1),
    ("temperature", 2.5),
    ("temperature", "0.5"),
    ("max_tokens", 0),
    ("max_tokens", 1.5),
    ("max_tokens", True),
    ("context_limit", 0),
    ("context_limit", -8),
    ("context_limit", 8.0),
    ("context_limit", "128"),
    ("context_limit", True),
    ("context_limit", None),
    ("context_strategy", "greedy"),
    ("tokenizer", "p50k_base"),
    ("timeout", 0),
    ("timeout", -1),
    ("timeout", "30"),
    ("timeout", 7200),
    ("max_retries", -1),
    ("max_retries", 1.0),
    ("max_retries", 11),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
def test_bad_value_names_field_and_rule(field: str, value: Any) -> None:
    with pytest.raises(LLMConfigError) as info:
        validate_llm_config({**BASE, field: value})
    error = info.value
    assert isinstance(error, ValueError)
    assert error.field == field
    assert error.rule  # the failing JSON Schema keyword
    assert str(error).startswith(f"{field}: must ")
    assert SECRET not in str(error) and SECRET not in repr(error.errors)


def test_context_limit_message_matches_the_documented_rule() -> None:
    with pytest.raises(LLMConfigError, match=r"^context_limit: must be an integer greater than 0$") as info:
        validate_llm_config({**BASE, "context_limit": 0})
    assert info.value.rule == "minimum"


@pytest.mark.parametrize("missing", ["model", "context_limit"])
def test_missing_required_field(missing: str) -> None:
    config = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(LLMConfigError, match=rf"^{missing}: is required$") as info:
        validate_llm_config(config)
    assert (info.value.field, info.value.rule) == (missing, "required")


@pytest.mark.parametrize(("context_limit", "max_tokens"), [(2, 5000), (2, 2000), (2, 1489), (1, 1000), (8, 7600)])
def test_a_max_tokens_that_leaves_the_prompt_no_room_in_the_window_is_refused(context_limit: int, max_tokens: int) -> None:
    # The reply's room comes out of the window: the prompt must keep at least 512 tokens of it.
    with pytest.raises(LLMConfigError) as info:
        validate_llm_config({**BASE, "context_limit": context_limit, "max_tokens": max_tokens})
    assert (info.value.field, info.value.rule) == ("max_tokens", "window")
    assert str(info.value) == (
        "max_tokens: must leave at least 512 tokens of the context window for the prompt: "
        "at most context_limit * 1000 - 512"
    )
    assert info.value.errors == [("max_tokens", "window", str(info.value).removeprefix("max_tokens: "))]


def test_a_max_tokens_that_leaves_the_prompt_its_room_is_kept() -> None:
    assert validate_llm_config({**BASE, "context_limit": 2, "max_tokens": 1488})["max_tokens"] == 1488
    assert "max_tokens" not in validate_llm_config({**BASE, "context_limit": 1})  # the default fits any window


def test_every_problem_is_listed_once_per_field() -> None:
    with pytest.raises(LLMConfigError) as info:
        validate_llm_config({"model": "", "temperature": 9, "apikey": SECRET})
    fields = [field for field, _, _ in info.value.errors]
    assert fields == ["model", "temperature", "context_limit", "apikey"]
    assert SECRET not in str(info.value.errors)


def test_unknown_key_is_rejected_without_echoing_its_value() -> None:
    with pytest.raises(LLMConfigError) as info:
        validate_llm_config({**BASE, "openai_api_key": SECRET})
    assert info.value.field == "openai_api_key"
    assert info.value.rule == "additionalProperties"
    assert "unknown field" in str(info.value) and "api_key" in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("config", [None, [], "gpt-4o", 128])
def test_config_must_be_an_object(config: Any) -> None:
    with pytest.raises(LLMConfigError, match="must be a JSON object") as info:
        validate_llm_config(config)
    assert info.value.field is None


def test_defaults_fill_a_normalised_copy() -> None:
    config = {"model": "qwen2.5:14b", "context_limit": 32}
    normalised = validate_llm_config(config)
    assert normalised == {
        "provider": "openai",
        "model": "qwen2.5:14b",
        "context_limit": 32,
        "context_strategy": "balanced",
        "timeout": 120,
        "max_retries": 2,
    }
    assert config == {"model": "qwen2.5:14b", "context_limit": 32}  # not mutated
    assert validate_llm_config(types.MappingProxyType(config)) == normalised  # any mapping


def test_full_config_is_kept() -> None:
    config = {
        "name": "Lab Ollama",
        "provider": "openai",
        "model": "llama3.1:8b",
        "base_url": "http://192.168.1.10:11434/v1",
        "api_key": "ollama",
        "temperature": 0,
        "max_tokens": 2048,
        "context_limit": 8,
        "context_strategy": "conservative",
        "tokenizer": "o200k_base",
        "timeout": 30.5,
        "max_retries": 0,
    }
    assert validate_llm_config(config) == config


def test_schema_agrees_with_the_context_manager() -> None:
    properties = llm_config_schema()["properties"]
    assert set(properties["context_strategy"]["enum"]) == set(CONTEXT_STRATEGY_RATIOS)
    assert set(properties["tokenizer"]["enum"]) == set(ENCODING_SPECS)
    assert set(properties["provider"]["enum"]) == {"openai", "anthropic", "google_genai", "ollama"}


@given(
    limit=st.one_of(st.integers(-5, 10**7), st.floats(allow_nan=False), st.booleans(), st.text(max_size=3), st.none()),
    strategy=st.one_of(st.sampled_from([*CONTEXT_STRATEGY_RATIOS, "greedy", ""]), st.none()),
)
def test_schema_accepts_exactly_what_resolve_budget_accepts(limit: Any, strategy: Any) -> None:
    config: dict[str, Any] = {"model": "m", "context_limit": limit}
    if strategy is not None:
        config["context_strategy"] = strategy
    try:
        resolve_budget(config)
        budget_ok = True
    except ValueError:
        budget_ok = False
    # resolve_budget treats an empty strategy as the default; the schema is stricter there.
    if strategy == "":
        budget_ok = False
    try:
        validate_llm_config(config)
        schema_ok = True
    except LLMConfigError:
        schema_ok = False
    assert schema_ok == budget_ok


# Values around and between the bounds of each history-window field, and of every wrong type.
_WINDOW_VALUES = st.one_of(
    st.sampled_from([0, 0.05, 0.0499999, 0.1, 0.0999999, 0.65, 1, 1.0, 1.0000001, 2, 999, 1000, 1001, 10**6, -1]),
    st.integers(-5, 1100), st.floats(), st.booleans(), st.text(max_size=3), st.lists(st.integers(), max_size=1),
)


@given(
    field=st.sampled_from(["context_low_water", "tool_output_share", "tool_output_turns", "context_summary",
                           "mask_tool_outputs"]),
    value=st.one_of(_WINDOW_VALUES, st.none()),
)
def test_schema_accepts_exactly_what_resolve_window_settings_accepts(field: str, value: Any) -> None:
    config: dict[str, Any] = {"model": "m", "context_limit": 8}
    if value is not None:  # None (the field absent) is the default for both
        config[field] = value
    try:
        resolve_window_settings(config)
        runtime_ok = True
    except ValueError:
        runtime_ok = False
    try:
        validate_llm_config(config)
        schema_ok = True
    except LLMConfigError:
        schema_ok = False
    assert schema_ok == runtime_ok, (field, value)


def test_window_settings_errors_state_their_bounds() -> None:
    for field, value, bounds in [("context_low_water", 1.5, "a number between 0.1 and 1"),
                                 ("tool_output_share", 0.01, "a number between 0.05 and 1"),
                                 ("tool_output_turns", 1001, "an integer between 1 and 1000")]:
        with pytest.raises(ValueError) as info:
            resolve_window_settings({field: value})
        assert str(info.value) == f"Invalid {field}: {value!r} ({bounds})"


def test_importing_does_no_work() -> None:
    code = (
        "import sys\n"
        "from gns3server.agent.gns3_copilot.agent.model import factory as m, schema\n"
        "assert schema.schema_text.cache_info().currsize == 0, 'schema read at import'\n"
        "assert 'langchain_openai' not in sys.modules, 'provider imported at import'\n"
        "assert 'langchain.chat_models' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------- redaction


def test_redact_config_masks_key_and_url_credentials() -> None:
    config = {**BASE, "base_url": "https://user:pw@proxy.example/v1"}
    safe = redact_config(config)
    assert safe["api_key"] == "sk-…abcd"
    assert safe["base_url"] == "https://***@proxy.example/v1"
    assert config["api_key"] == SECRET  # a copy
    assert redact_config({"api_key": "short"})["api_key"] == "…"
    assert "api_key" not in redact_config({"model": "m"})


def test_model_repr_and_logs_never_show_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger=model_factory.__name__)
    model = create_chat_model({**BASE, "base_url": "http://127.0.0.1:9/v1"})
    assert SECRET not in repr(model)
    assert "Creating chat model" in caplog.text
    assert SECRET not in caplog.text


# -------------------------------------------------------------- model creation


def test_openai_model_gets_every_setting() -> None:
    model = create_chat_model(
        {
            **BASE,
            "base_url": "http://127.0.0.1:9/v1",
            "temperature": 0.2,
            "max_tokens": 512,
            "timeout": 7,
            "max_retries": 4,
        }
    )
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert isinstance(model.openai_api_key, SecretStr) and model.openai_api_key.get_secret_value() == SECRET
    assert (model.temperature, model.max_tokens, model.request_timeout, model.max_retries) == (0.2, 512, 7, 4)
    assert model.streaming is True and model.stream_usage is True
    # A silent stream is ended after the configured timeout, not langchain-openai's own 120 s
    # (bounded by the copilot's stream, openai_wire.TimedChunks: langchain-openai's own bound is off).
    assert model.chunk_timeout == 7


def test_openai_without_key_or_base_url_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError) as info:
        create_chat_model({"model": "gpt-4o-mini", "context_limit": 128})
    assert (info.value.field, info.value.rule) == ("api_key", "required")


def test_create_base_model_with_tools_binds_them() -> None:
    bound = create_base_model_with_tools([get_topology, start_node], BASE)
    names = [t["function"]["name"] for t in bound.kwargs["tools"]]  # type: ignore[attr-defined]
    assert names == ["get_topology", "start_node"]
    assert isinstance(create_base_model_with_tools([], BASE), ChatOpenAI)


def test_invalid_config_is_rejected_before_any_model_is_built() -> None:
    with pytest.raises(LLMConfigError, match=r"^temperature: "):
        create_base_model_with_tools([get_topology], {**BASE, "temperature": 3})


@pytest.mark.parametrize(
    ("provider", "module", "extra"),
    [
        ("anthropic", "langchain_anthropic", "anthropic"),
        ("google_genai", "langchain_google_genai", "google"),
        ("ollama", "langchain_ollama", "ollama"),
    ],
)
def test_missing_extra_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, provider: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail even if installed
    with pytest.raises(LLMConfigError) as info:
        create_chat_model({**BASE, "provider": provider, "model": "some-model"})
    assert (info.value.field, info.value.rule) == ("provider", "extra_missing")
    assert f"pip install 'gns3server-copilot[{extra}]'" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)


def test_missing_openai_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_openai", None)
    with pytest.raises(LLMConfigError, match="pip install langchain-openai"):
        create_chat_model(BASE)


class _FakeChatModel:
    """Stands in for a provider class so the keyword mapping can be checked without the extra."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.fixture
def fake_provider(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install fake provider modules; LangChain caches provider classes, so clear that cache around the test."""
    cache_clear = chat_models_base._get_chat_model_creator.cache_clear

    def install(module: str, class_name: str) -> None:
        fake = types.ModuleType(module)
        setattr(fake, class_name, _FakeChatModel)
        monkeypatch.setitem(sys.modules, module, fake)

    cache_clear()
    yield install
    cache_clear()


def test_native_ollama_mapping(fake_provider: Any) -> None:
    fake_provider("langchain_ollama", "ChatOllama")
    model = create_chat_model(
        {
            **BASE,
            "provider": "ollama",
            "model": "qwen2.5:14b",
            "base_url": "http://10.0.0.5:11434",
            "max_tokens": 256,
            "temperature": 0.1,
            "timeout": 30,
        }
    )
    assert cast(_FakeChatModel, model).kwargs == {
        "model": "qwen2.5:14b",
        "base_url": "http://10.0.0.5:11434",
        "num_predict": 256,
        "temperature": 0.1,
        "client_kwargs": {"timeout": 30, "headers": {"Authorization": f"Bearer {SECRET}"}},
    }


def test_anthropic_mapping(fake_provider: Any) -> None:
    fake_provider("langchain_anthropic", "ChatAnthropic")
    model = create_chat_model({**BASE, "provider": "anthropic", "model": "claude-sonnet-4-5", "max_tokens": 4096})
    assert cast(_FakeChatModel, model).kwargs == {
        "model": "claude-sonnet-4-5",
        "api_key": SECRET,
        "max_tokens": 4096,
        "timeout": 120,
        "max_retries": 2,
        "streaming": True,
    }


def test_provider_constructor_failure_is_a_config_error_without_its_text(
    fake_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(**kwargs: Any) -> None:
        raise ValueError(f"bad key {kwargs['api_key']}")

    fake = types.ModuleType("langchain_google_genai")
    fake.ChatGoogleGenerativeAI = explode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain_google_genai", fake)
    with pytest.raises(LLMConfigError) as info:
        create_chat_model({**BASE, "provider": "google_genai", "model": "gemini-2.5-flash"})
    assert (info.value.field, info.value.rule) == ("provider", "unusable")
    assert SECRET not in str(info.value)


# ------------------------------------------------------ context-length errors


class _CodedError(Exception):
    def __init__(self, message: str, code: str | None = None, body: Any = None, status_code: int | None = None):
        super().__init__(message)
        self.code, self.body, self.status_code = code, body, status_code


@pytest.mark.parametrize(
    "exc",
    [
        _CodedError("Bad request", code="context_length_exceeded"),
        _CodedError("Bad request", body={"error": {"code": "context_length_exceeded"}}),
        ValueError("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"),
        ValueError("prompt is too long: 210000 tokens > 200000 maximum"),
        ValueError("The input token count (1100000) exceeds the maximum number of tokens allowed (1048576)."),
        ValueError("the request exceeds the available context size, try increasing it"),
    ],
)
def test_context_length_errors_are_recognised(exc: BaseException) -> None:
    assert is_context_length_error(exc)


def test_context_length_error_found_through_the_cause_chain() -> None:
    try:
        try:
            raise ValueError("maximum context length is 4096 tokens")
        except ValueError as inner:
            raise RuntimeError("LLM call failed") from inner
    except RuntimeError as outer:
        assert is_context_length_error(outer)


@pytest.mark.parametrize(
    "exc",
    [
        _CodedError("Rate limit reached for gpt-4o: tokens per min, maximum context length", status_code=429),
        _CodedError("Invalid 'messages[1].tool_call_id'", code="invalid_value"),
        TimeoutError("Request timed out."),
        ValueError("context_limit: must be an integer greater than 0"),
    ],
)
def test_other_errors_are_not_context_length_errors(exc: BaseException) -> None:
    assert not is_context_length_error(exc)


# ----------------------------------------- the real ChatOpenAI against the stub


@pytest.fixture
async def stub() -> Any:
    async with OpenAIStub(api_key=SECRET) as running:
        yield running


def _config(stub: OpenAIStub, **overrides: Any) -> dict[str, Any]:
    return {**BASE, "base_url": stub.base_url, "timeout": 10, "max_retries": 0, **overrides}


async def test_streamed_text_arrives_in_several_chunks(stub: OpenAIStub) -> None:
    stub.enqueue(reply("R1 and R2 are both started.", chunk_chars=5))
    model = create_chat_model(_config(stub))
    chunks = [chunk async for chunk in model.astream([HumanMessage("status?")])]
    texts = [str(c.content) for c in chunks if c.content]
    assert len(texts) >= 5
    assert "".join(texts) == "R1 and R2 are both started."
    body = stub.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "status?"}]


async def test_parallel_tool_calls_are_parsed(stub: OpenAIStub) -> None:
    stub.enqueue(
        reply(
            "Checking.",
            tool_calls=[
                tool_call("get_topology", {"project_id": "p-1"}, id="call_a"),
                tool_call("start_node", {"name": "R1", "wait": True}, id="call_b"),
                tool_call("start_node", {"name": "R2"}, id="call_c"),
            ],
            chunk_chars=3,  # arguments arrive in many pieces
        )
    )
    model = create_base_model_with_tools([get_topology, start_node], _config(stub))
    result = await model.ainvoke([HumanMessage("start R1 and R2")])
    assert isinstance(result, AIMessage)
    assert result.content == "Checking."
    assert [(c["id"], c["name"], c["args"]) for c in result.tool_calls] == [
        ("call_a", "get_topology", {"project_id": "p-1"}),
        ("call_b", "start_node", {"name": "R1", "wait": True}),
        ("call_c", "start_node", {"name": "R2"}),
    ]
    sent = [t["function"]["name"] for t in stub.requests[0]["tools"]]
    assert sent == ["get_topology", "start_node"]


async def test_streamed_tool_call_chunks_keep_parallel_calls_distinct(stub: OpenAIStub) -> None:
    stub.enqueue(reply(tool_calls=[tool_call("start_node", {"name": "R1"}), tool_call("start_node", {"name": "R2"})]))
    model = create_base_model_with_tools([start_node], _config(stub))
    merged: Any = None
    async for chunk in model.astream("go"):
        merged = chunk if merged is None else merged + chunk
    assert isinstance(merged, AIMessageChunk)
    assert [c["args"] for c in merged.tool_calls] == [{"name": "R1"}, {"name": "R2"}]
    assert len({c["id"] for c in merged.tool_calls}) == 2


async def test_usage_is_reported_on_the_result(stub: OpenAIStub) -> None:
    stub.enqueue(reply("ok", usage=(1234, 56)))
    result = await create_chat_model(_config(stub)).ainvoke("hi")
    assert result.usage_metadata is not None
    assert (result.usage_metadata["input_tokens"], result.usage_metadata["output_tokens"]) == (1234, 56)


async def test_rate_limit_is_retried(stub: OpenAIStub) -> None:
    stub.enqueue(rate_limited(), "after the limit")
    result = await create_chat_model(_config(stub, max_retries=1)).ainvoke("hi")
    assert result.content == "after the limit"
    assert len(stub.requests) == 2


async def test_rate_limit_surfaces_without_retries(stub: OpenAIStub) -> None:
    stub.enqueue(rate_limited(), "never sent")
    with pytest.raises(openai.RateLimitError) as info:
        await create_chat_model(_config(stub, max_retries=0)).ainvoke("hi")
    assert not is_context_length_error(info.value)
    assert len(stub.requests) == 1 and stub.pending == 1


async def test_server_error_is_retried_then_surfaces(stub: OpenAIStub) -> None:
    stub.enqueue(server_error(), "recovered")
    assert (await create_chat_model(_config(stub, max_retries=1)).ainvoke("hi")).content == "recovered"
    stub.enqueue(server_error(), server_error())
    with pytest.raises(openai.InternalServerError):
        await create_chat_model(_config(stub, max_retries=1)).ainvoke("hi")
    assert len(stub.requests) == 4


async def test_timeout_when_the_server_hangs(stub: OpenAIStub) -> None:
    stub.enqueue(hang())
    with pytest.raises(openai.APITimeoutError):
        await create_chat_model(_config(stub, timeout=0.2)).ainvoke("hi")


async def test_timeout_in_the_middle_of_a_stream(stub: OpenAIStub) -> None:
    stub.enqueue(reply("partial answer that never ends", hold_after=2))
    received: list[str] = []
    # The config's timeout bounds the silence between chunks (langchain-openai's chunk timeout, a
    # TimeoutError) as well as the HTTP read (openai's APITimeoutError): either is llm_timeout.
    # The hold never ends, so any timeout fires; 5 s leaves a busy machine time for the first chunks.
    with pytest.raises((openai.APITimeoutError, TimeoutError)) as info:
        async for chunk in create_chat_model(_config(stub, timeout=5)).astream("hi"):
            received.append(str(chunk.content))
    assert "".join(received) == "partial "  # the two 4-character chunks sent before the hold
    assert isinstance(provider_error(info.value), LLMTimeoutError)


async def test_context_length_rejection_is_recognised(stub: OpenAIStub) -> None:
    stub.enqueue(context_length_exceeded(limit=8192, requested=9100))
    with pytest.raises(openai.BadRequestError) as info:
        await create_chat_model(_config(stub, max_retries=2)).ainvoke("a very long history")
    assert is_context_length_error(info.value)
    assert len(stub.requests) == 1  # a 400 is not retried


async def test_api_key_is_sent_as_bearer_token(stub: OpenAIStub) -> None:
    stub.enqueue("hello")
    await create_chat_model(_config(stub)).ainvoke("hi")
    assert stub.received[-1].headers["Authorization"] == f"Bearer {SECRET}"
    stub.enqueue("not reached")
    with pytest.raises(openai.AuthenticationError) as info:
        await create_chat_model(_config(stub, api_key="sk-wrong-key-0000")).ainvoke("hi")
    assert SECRET not in str(info.value)


async def test_base_url_without_key_never_sends_the_environment_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-operator-key-9999")
    async with OpenAIStub() as keyless:
        keyless.enqueue("local model here")
        config = {"model": "llama3.1:8b", "base_url": keyless.base_url, "context_limit": 8, "max_retries": 0}
        assert (await create_chat_model(config).ainvoke("hi")).content == "local model here"
        assert keyless.received[-1].headers["Authorization"] == f"Bearer {model_factory.NO_API_KEY_PLACEHOLDER}"


async def test_a_redirect_from_the_model_server_is_not_followed(stub: OpenAIStub) -> None:
    """The endpoint policy judged base_url: a 307 must not take the request (and key) elsewhere."""
    from aiohttp import web

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(stub.base_url + "/chat/completions")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", moved)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        stub.enqueue("reached the other server")
        config = _config(stub, base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET)
        with pytest.raises(openai.APIStatusError) as refused:
            await create_chat_model(config).ainvoke("hi")
        assert refused.value.status_code == 307
        assert stub.requests == []  # the redirect's target never heard from us
    finally:
        await runner.cleanup()


async def _transform_walks(stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], n: int) -> int:
    """How many steps the SDK's request transform takes for one streamed call of ``n`` user/assistant pairs."""
    from openai._utils import _transform

    walks = 0
    original = _transform._async_transform_recursive

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal walks
        walks += 1
        return await original(*args, **kwargs)

    monkeypatch.setattr(_transform, "_async_transform_recursive", counted)
    history = [m for i in range(n) for m in (HumanMessage(f"question {i}"), AIMessage(f"answer {i}"))]
    stub.enqueue(reply("ok"))
    model = create_base_model_with_tools([get_topology, start_node], config)
    [chunk async for chunk in model.astream([*history, HumanMessage("and now?")])]
    monkeypatch.setattr(_transform, "_async_transform_recursive", original)
    body = stub.requests[-1]
    assert len(body["messages"]) == 2 * n + 1 and body["messages"][-1] == {"role": "user", "content": "and now?"}
    assert [t["function"]["name"] for t in body["tools"]] == ["get_topology", "start_node"]
    assert body["tool_choice"] == "auto" and body["stream"] is True
    return walks


@pytest.mark.parametrize("base_url", [True, False], ids=["compatible-server", "openai"])
async def test_the_sdk_does_not_walk_every_message_of_a_request(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, base_url: bool
) -> None:
    """The OpenAI SDK's request transform walked each message of every call on the event loop
    (~0.2 ms a message): the messages now go as the JSON they already are, whatever their number."""
    config = _config(stub)
    if not base_url:  # OpenAI itself: no base_url in the config, the client pointed at the stub
        config.pop("base_url")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    few = await _transform_walks(stub, monkeypatch, config, 2)
    many = await _transform_walks(stub, monkeypatch, config, 200)
    assert many == few


def test_a_payload_keeps_its_own_extra_body_and_structured_output_is_left_alone() -> None:
    from gns3server.agent.gns3_copilot.agent.model.openai_payload import untransformed

    messages = [{"role": "user", "content": "hi"}]
    lean = untransformed({"model": "m", "messages": messages, "extra_body": {"top_k": 5}})
    assert lean == {"model": "m", "messages": [], "extra_body": {"messages": messages, "top_k": 5}}
    parsed = {"model": "m", "messages": messages, "response_format": {"type": "json_object"}}
    assert untransformed(parsed) is parsed
    responses = {"model": "m", "input": messages}
    assert untransformed(responses) is responses


async def _sent_bodies_and_conversions(stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any],
                                       model: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """Three calls of one model on a growing conversation (the same message objects, as a run's
    history keeps them): the bodies sent, and how many messages were converted each time (by
    langchain-openai, or by the copilot's own conversion of a plain message)."""
    from langchain_core.messages import SystemMessage, ToolMessage
    from langchain_openai.chat_models import base as openai_base

    from gns3server.agent.gns3_copilot.agent.model import openai_payload

    converted: list[int] = []
    original, ours = openai_base._convert_message_to_dict, openai_payload.plain_message_dict

    def counted(message: Any, *args: Any, **kwargs: Any) -> Any:
        converted[-1] += 1
        return original(message, *args, **kwargs)

    def counted_plain(message: Any) -> Any:
        made = ours(message)
        converted[-1] += made is not None  # None: langchain-openai converts it (counted there)
        return made

    monkeypatch.setattr(openai_base, "_convert_message_to_dict", counted)
    monkeypatch.setattr(openai_payload, "plain_message_dict", counted_plain)
    history: list[Any] = [HumanMessage("question 0"), AIMessage("", tool_calls=[
        {"id": "c1", "name": "get_topology", "args": {}, "type": "tool_call"}]),
        ToolMessage("R1 R2", tool_call_id="c1", name="get_topology"), AIMessage("answer 0")]
    for n in range(3):
        history.append(HumanMessage(f"question {n + 1}"))
        stub.enqueue(reply(f"answer {n + 1}"))
        converted.append(0)
        [chunk async for chunk in model.astream([SystemMessage("You are the copilot."), *history])]
    monkeypatch.setattr(openai_base, "_convert_message_to_dict", original)
    monkeypatch.setattr(openai_payload, "plain_message_dict", ours)
    return stub.requests[-3:], converted


@pytest.mark.parametrize("base_url", [True, False], ids=["compatible-server", "openai"])
async def test_a_model_that_outlives_its_run_converts_each_message_object_once(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, base_url: bool
) -> None:
    """langchain-openai converted every message of every call to its dict (24 ms a call at 500 turns):
    a message object seen before keeps its dict, and the body sent is exactly ChatOpenAI's own."""
    config = _config(stub)
    if not base_url:
        config.pop("base_url")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    ours, converted = await _sent_bodies_and_conversions(
        stub, monkeypatch, config, create_base_model_with_tools([get_topology], config))
    assert converted == [6, 2, 2]  # the first call all; then the new question and the system prompt (built anew)
    plain = ChatOpenAI(model=config["model"], api_key=SECRET, base_url=stub.base_url, max_retries=0)
    theirs, _ = await _sent_bodies_and_conversions(
        stub, monkeypatch, config, plain.bind_tools([get_topology], tool_choice="auto"))
    for mine, reference in zip(ours, theirs, strict=True):
        if base_url:  # what the compatible class sends differently, on purpose: "" for a null content
            reference["messages"] = [{**m, "content": "" if m["content"] is None else m["content"]}
                                     for m in reference["messages"]]
        assert mine["messages"] == reference["messages"]
        assert mine["tools"] == reference["tools"]


async def test_a_conversations_next_request_looks_up_only_its_new_messages_and_sends_replaced_ones(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request's messages are found by place in the conversation's previous request: the messages
    looked up per call stay few as the history grows, and a message replaced at its place (a masked
    copy) is sent as the new object says, as ChatOpenAI sends it."""
    from langchain_core.messages import SystemMessage

    from gns3server.agent.gns3_copilot.agent.context.identity import IdentityMemo

    looked_up: list[int] = []
    original = IdentityMemo.peek_all

    def counted(self: IdentityMemo, objs: Any, key: Any) -> list[Any]:
        looked_up.append(len(objs))
        return original(self, objs, key)

    monkeypatch.setattr(IdentityMemo, "peek_all", counted)
    config = _config(stub)
    ours = create_base_model_with_tools([get_topology], config)
    plain = ChatOpenAI(model=config["model"], api_key=SECRET, base_url=stub.base_url, max_retries=0)
    theirs = plain.bind_tools([get_topology], tool_choice="auto")
    history: list[Any] = [m for i in range(30) for m in (HumanMessage(f"question {i}"), AIMessage(f"answer {i}"))]
    sent: dict[str, list[dict[str, Any]]] = {"ours": [], "theirs": []}
    for step in range(3):
        if step == 2:
            history[5] = AIMessage("answer 2 [masked: 40 tokens]")  # another object at the same place
        history.append(HumanMessage(f"question {30 + step}"))
        for name, model in (("ours", ours), ("theirs", theirs)):
            stub.enqueue(reply(f"answer {30 + step}"))
            [chunk async for chunk in model.astream([SystemMessage("You are the copilot."), *history])]
            sent[name].append(stub.requests[-1]["messages"])
        history.append(AIMessage(f"answer {30 + step}"))
    assert looked_up[0] == 62
    assert looked_up[1:] == [3, 4]  # the system prompt (built anew) and what came since; then the replaced one
    assert sent["ours"][2][6] == {"role": "assistant", "content": "answer 2 [masked: 40 tokens]"}
    for mine, reference in zip(sent["ours"], sent["theirs"], strict=True):
        assert mine == [{**m, "content": "" if m["content"] is None else m["content"]} for m in reference]


async def test_a_request_that_holds_what_is_not_a_message_yet_is_converted_as_langchain_converts_it(
    stub: OpenAIStub,
) -> None:
    config = _config(stub)
    model = create_chat_model(config)
    stub.enqueue(reply("up"))
    [chunk async for chunk in model.astream([("system", "You are the copilot."), HumanMessage("status?"),
                                             {"role": "assistant", "content": "all up"}, ("user", "R2?")])]
    assert stub.requests[-1]["messages"] == [
        {"role": "system", "content": "You are the copilot."}, {"role": "user", "content": "status?"},
        {"role": "assistant", "content": "all up"}, {"role": "user", "content": "R2?"}]
