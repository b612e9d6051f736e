"""A scripted LangChain chat model for unit tests at the model boundary.

Tests say what the "LLM" answers, in order, and then check what it was asked::

    model = ScriptedChatModel()
    model.enqueue(
        AIMessage("", tool_calls=[{"name": "get_topology", "args": {}, "id": "call_1"}]),
        "PC1 and PC3 are not linked.",
    )
    ...
    assert model.calls[1][-1].type == "tool"

A response is an ``AIMessage`` (text and/or ``tool_calls``, optional
``usage_metadata``), a plain string, an exception instance to raise, or a
:class:`ScriptedResponse` wrapping one of those with a *gate*: an ``asyncio.Event``
the model awaits (before answering, or after ``gate_after`` streamed chunks) so a
test can abort a call in flight without sleeping; ``started`` is set once the model
reaches the gate. Streaming yields ``AIMessageChunk``s the way provider clients do:
text in several pieces, tool calls as ``tool_call_chunks`` with their arguments
split, usage on the last chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

__all__ = ["ScriptExhaustedError", "ScriptedChatModel", "ScriptedResponse"]

Response = AIMessage | str | BaseException


class ScriptExhaustedError(RuntimeError):
    """The code under test called the model more often than the test scripted."""


@dataclass
class ScriptedResponse:
    """One scripted answer, optionally held at a gate until the test releases it."""

    response: Response
    gate: asyncio.Event | None = None
    gate_after: int = 0
    """Streamed chunks to send before waiting at the gate (0: wait before answering)."""
    started: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the model has picked this response up (and reached its gate, if any)."""


def _as_message(response: AIMessage | str) -> AIMessage:
    return AIMessage(content=response) if isinstance(response, str) else response


class ScriptedChatModel(BaseChatModel):
    """Answers from a queue; records every call's messages (``calls``) and bound tools."""

    chunk_chars: int = 4
    """Characters per streamed text chunk, so any reply of 5+ characters streams in pieces."""
    streaming: bool = False
    """Like the provider clients: when True, ``invoke`` goes through the streaming path."""

    _queue: deque[ScriptedResponse] = PrivateAttr(default_factory=deque)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _call_tools: list[list[dict[str, Any]] | None] = PrivateAttr(default_factory=list)
    _bound_tools: list[list[Any]] = PrivateAttr(default_factory=list)

    # ----------------------------------------------------------- scripting API

    def enqueue(self, *responses: Response | ScriptedResponse) -> list[ScriptedResponse]:
        """Append answers to the script; returns their wrappers (for ``started`` events)."""
        wrapped = [r if isinstance(r, ScriptedResponse) else ScriptedResponse(r) for r in responses]
        for item in wrapped:
            if not isinstance(item.response, (AIMessage, str, BaseException)):
                raise TypeError(f"cannot script a {type(item.response).__name__}")
        self._queue.extend(wrapped)
        return wrapped

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """The message list of every call, in order (including a call that found the queue empty)."""
        return self._calls

    @property
    def call_tools(self) -> list[list[dict[str, Any]] | None]:
        """The tools (OpenAI format) each call was made with; ``None`` when unbound."""
        return self._call_tools

    @property
    def bound_tools(self) -> list[list[Any]]:
        """Every tool list passed to :meth:`bind_tools`, as given."""
        return self._bound_tools

    @property
    def pending(self) -> int:
        """Scripted responses not consumed yet."""
        return len(self._queue)

    # ------------------------------------------------------ BaseChatModel API

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Record the tools and bind them like a provider does; the binding shares this queue."""
        self._bound_tools.append(list(tools))
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _next(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ScriptedResponse:
        self._calls.append(list(messages))
        self._call_tools.append(kwargs.get("tools"))
        if not self._queue:
            last = messages[-1] if messages else None
            preview = f"{last.type}: {str(last.content)[:80]!r}" if last is not None else "no messages"
            raise ScriptExhaustedError(
                f"ScriptedChatModel: no scripted response left for call #{len(self._calls)} "
                f"(last message {preview}); enqueue() more responses"
            )
        return self._queue.popleft()

    def _next_sync(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ScriptedResponse:
        item = self._next(messages, kwargs)
        if item.gate is not None:
            raise TypeError("a gated ScriptedResponse needs an async call (ainvoke/astream)")
        item.started.set()
        return item

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        item = self._next_sync(messages, kwargs)
        return self._result(item.response)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        item = self._next(messages, kwargs)
        item.started.set()
        if item.gate is not None:
            await item.gate.wait()
        return self._result(item.response)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        item = self._next_sync(messages, kwargs)
        for chunk in self._chunks(item.response):
            if run_manager and isinstance(chunk.message.content, str) and chunk.message.content:
                run_manager.on_llm_new_token(chunk.message.content, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        item = self._next(messages, kwargs)
        if item.gate is None:
            item.started.set()
        if isinstance(item.response, BaseException):
            if item.gate is not None:
                item.started.set()
                await item.gate.wait()
            raise item.response
        chunks = self._chunks(item.response)
        for index, chunk in enumerate(chunks):
            if item.gate is not None and index == min(item.gate_after, len(chunks) - 1):
                item.started.set()
                await item.gate.wait()
            if run_manager and isinstance(chunk.message.content, str) and chunk.message.content:
                await run_manager.on_llm_new_token(chunk.message.content, chunk=chunk)
            yield chunk

    # ----------------------------------------------------------------- helpers

    @staticmethod
    def _result(response: Response) -> ChatResult:
        if isinstance(response, BaseException):
            raise response
        message = _as_message(response)
        return ChatResult(generations=[ChatGeneration(message=message.model_copy(deep=True))])

    def _chunks(self, response: Response) -> list[ChatGenerationChunk]:
        """The chunks a provider would stream for ``response`` (raising it if it is an exception)."""
        if isinstance(response, BaseException):
            raise response
        message = _as_message(response)
        chunks: list[AIMessageChunk] = []
        text = message.content if isinstance(message.content, str) else ""
        step = max(1, self.chunk_chars)
        for start in range(0, len(text), step):
            chunks.append(AIMessageChunk(content=text[start : start + step], id=message.id))
        if not isinstance(message.content, str):  # content blocks: one chunk, as is
            chunks.append(AIMessageChunk(content=message.content, id=message.id))
        for index, call in enumerate(message.tool_calls):
            args = json.dumps(call["args"])
            half = len(args) // 2
            chunks.append(
                AIMessageChunk(
                    content="",
                    id=message.id,
                    tool_call_chunks=[{"name": call["name"], "args": args[:half], "id": call["id"], "index": index}],
                )
            )
            chunks.append(
                AIMessageChunk(
                    content="",
                    id=message.id,
                    tool_call_chunks=[{"name": None, "args": args[half:], "id": None, "index": index}],
                )
            )
        chunks.append(
            AIMessageChunk(
                content="",
                id=message.id,
                usage_metadata=message.usage_metadata,
                response_metadata={
                    "finish_reason": "tool_calls" if message.tool_calls else "stop",
                    **message.response_metadata,
                },
                chunk_position="last",
            )
        )
        return [ChatGenerationChunk(message=chunk) for chunk in chunks]
