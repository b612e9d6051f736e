"""One model call of the graph: streamed when the server can, and what an empty answer means.

:class:`ModelCalls` holds a run's models (the tools bound; built on first use: the
same tools unstreamed, for a server that cannot stream tool calls, and the model
without tools) and makes each call:

* streamed, forwarding text deltas as ``content`` events; a stream that stops
  without a finish reason is :class:`~.errors.LLMStreamCutError`;
* an empty streamed body with tools bound is asked again unstreamed, and the
  server remembered as unable to stream tool calls (``ServerTraits``);
* an answer still empty with tools offered (llama-cpp-python's function-calling
  format can only produce a tool call there) is asked once more without tools,
  for the text answer the model chose; empty after that, a named error;
* tool results go as user messages to a server whose chat template drops them
  (:meth:`ModelCalls.sendable`, measured the first time it matters).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer

from .. import events
from ..context.counting import content_text
from ..server.tool_results import tool_results_as_user
from ..server.traits import ServerTraits
from .errors import LLMEmptyAnswerError, LLMStreamCutError
from .plain_stream import plain_chunks

log = logging.getLogger(__name__)

__all__ = ["EMPTY_ANSWER_MESSAGE", "ModelCalls"]

EMPTY_ANSWER_MESSAGE = (
    "The model server answered with an empty message (HTTP 200, no text and no tool call), "
    "also when asked again unstreamed and without tools. Check the model server's log and its chat format."
)
# Keys under which providers report why a reply ended; a stream without one was cut.
_FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason")
_NO_CHUNKS = "No generation chunks were returned"

BindTools = Callable[[Sequence[BaseTool]], Any]


def is_empty_answer(message: AIMessage) -> bool:
    return not content_text(message.content).strip() and not message.tool_calls and not message.invalid_tool_calls


async def stream_model(model: Any, prepared: list[BaseMessage], config: RunnableConfig) -> AIMessage | None:
    """Stream one model call, forwarding text deltas as ``content`` events.

    None when the server sent no chunk at all (an empty 200 body); raises
    :class:`LLMStreamCutError` when it sent some but never said the reply was complete.
    """
    writer = get_stream_writer()
    chunks: list[AIMessageChunk] = []
    # Read from the provider directly when no callback would see the call (plain_stream.py).
    stream = plain_chunks(model, prepared, config) or model.astream(prepared, config)
    try:
        async for chunk in stream:
            text = content_text(chunk.content)
            if text:
                writer(events.content(text))
            chunks.append(chunk)
    except ValueError as exc:
        # LangChain's way of saying the stream had no chunk at all.
        if chunks or _NO_CHUNKS not in str(exc):
            raise
    if not chunks:
        return None
    # Merged once at the end: adding chunk by chunk builds a message object per chunk
    # (14 ms of event-loop time for a 1,000-chunk answer, against 0.7 ms).
    message = message_chunk_to_message(add_ai_message_chunks(chunks[0], *chunks[1:]))
    if not any(message.response_metadata.get(key) for key in _FINISH_KEYS):
        raise LLMStreamCutError(
            f"The model server's streamed answer stopped after {len(chunks)} chunk(s) without saying it was "
            "complete (no finish reason): the connection was cut or the server failed mid-answer."
        )
    return message if isinstance(message, AIMessage) else AIMessage(content=content_text(message.content))


async def invoke_model(model: Any, prepared: list[BaseMessage], config: RunnableConfig) -> AIMessage:
    """One unstreamed model call; its text goes out as a single ``content`` event."""
    message = await model.ainvoke(prepared, config)
    if not isinstance(message, AIMessage):
        message = AIMessage(content=content_text(message.content))
    text = content_text(message.content)
    if text:
        get_stream_writer()(events.content(text))
    return message


class ModelCalls:
    """A run's models and how each call is made (see the module's docstring).

    ``bind_tools(tools)`` makes the model with ``tools`` bound (none: the bare model);
    ``bind_tools_unstreamed`` the same, unstreamed (None: the streaming model's own
    unstreamed call is used). Building one is CPU work: the first is built with the
    graph (off the event loop), the others in a worker thread when first needed.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool],
        bind_tools: BindTools,
        traits: ServerTraits,
        bind_tools_unstreamed: BindTools | None = None,
        probe_tool_results: Callable[[], Awaitable[bool | None]] | None = None,
    ) -> None:
        self._tools = list(tools)
        self._bind_tools = bind_tools
        self._bind_unstreamed = bind_tools_unstreamed
        self._traits = traits
        self._probe_tool_results = probe_tool_results
        self._model = bind_tools(self._tools)
        self._unstreamed: Any = None
        self._bare: Any = None

    async def _unstreamed_model(self) -> Any:
        if self._bind_unstreamed is None:
            return self._model
        if self._unstreamed is None:
            self._unstreamed = await asyncio.to_thread(self._bind_unstreamed, self._tools)
        return self._unstreamed

    async def _bare_model(self) -> Any:
        if self._bare is None:
            self._bare = await asyncio.to_thread(self._bind_tools, [])
        return self._bare

    async def call(
        self, prepared: list[BaseMessage], config: RunnableConfig, offer_tools: bool = True
    ) -> tuple[AIMessage, bool]:
        """One model answer and whether the request that gave it carried the tools."""
        response: AIMessage | None
        tools = bool(self._tools)
        if not offer_tools:
            response = await stream_model(await self._bare_model(), prepared, config)
            if response is None or is_empty_answer(response):
                raise LLMEmptyAnswerError(EMPTY_ANSWER_MESSAGE)
            return response, False
        if tools and not self._traits.streams_tool_calls:
            response = await invoke_model(await self._unstreamed_model(), prepared, config)
        else:
            response = await stream_model(self._model, prepared, config)
            if response is not None and not is_empty_answer(response):
                return response, tools
            if response is None and tools:
                log.warning("The model server sent an empty streamed answer with tools bound; retrying unstreamed")
                response = await invoke_model(await self._unstreamed_model(), prepared, config)
                if not is_empty_answer(response):
                    self._traits.streams_tool_calls = False
                    log.warning("This model server cannot stream tool calls: calls with tools go unstreamed from now on")
        with_tools = tools
        if tools and (response is None or is_empty_answer(response)):
            log.warning("Empty answer with tools offered; asking again without tools for a text answer")
            response, with_tools = await stream_model(await self._bare_model(), prepared, config), False
        if response is None or is_empty_answer(response):
            raise LLMEmptyAnswerError(EMPTY_ANSWER_MESSAGE)
        return response, with_tools

    async def sendable(self, prepared: list[BaseMessage]) -> list[BaseMessage]:
        """``prepared`` in a form the server renders whole: tool results as user messages
        for a server whose chat template drops them (measured the first time it matters)."""
        if self._probe_tool_results is None or not any(isinstance(m, ToolMessage) for m in prepared):
            return prepared
        traits, probe = self._traits, self._probe_tool_results

        async def measure() -> None:
            kept = await probe()
            traits.tool_results = "unknown" if kept is None else "kept" if kept else "dropped"

        await traits.learn("tool_results", lambda: traits.tool_results is not None, measure)
        return tool_results_as_user(prepared) if traits.tool_results == "dropped" else prepared
