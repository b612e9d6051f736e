"""A model call's streamed chunks without LangChain's tracing work, when nothing traces the call.

``BaseChatModel.astream`` wraps the provider's own ``_astream`` in what callbacks need: every
message of the request formatted for tracing and normalised again (a walk of the whole request,
~1-2 ms a call at 500 turns and growing with the conversation), a callback manager and a run
started per call, an ``on_llm_new_token`` per chunk, and all the chunks merged once more at the
end for ``on_llm_end``, which the graph's model call merges itself. With no callback handler
(no tracer configured, none in the run's config: the copilot's graph streams its own events)
nobody reads any of it.

:func:`plain_chunks` gives the chunks ``_astream`` gives, with what ``astream`` adds to each
that its caller sees: the run's id as the message id (``lc_run--<uuid>``, as LangChain names
it), the generation's info in ``response_metadata``, and the closing empty chunk
(``chunk_position="last"``). It answers None, and the caller takes ``astream``, whenever
anything else would apply: a handler (a tracer set by environment, callbacks in the config or
on the model), a rate limiter, the v1 output format, content that is not plain text (which
``astream`` normalises), a model that does not say it may be streamed this way.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableBinding, RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs
from langchain_core.utils._gateway import GATEWAY_METADATA_RESPONSE_KEY
from langchain_core.utils.utils import LC_ID_PREFIX

__all__ = ["PLAIN_STREAMING", "plain_chunks"]

PLAIN_STREAMING = "plain_streaming"
"""The class attribute a chat model sets to True when its ``_astream`` may be read this way."""
TEXT_ONLY = "text_only"
"""The method such a model may have that says whether all messages' contents are plain strings."""
# What ``astream`` takes out of the keyword arguments before calling ``_astream``.
_TRACING_ONLY = ("ls_structured_output_format", "structured_output_format")
_CONTENT = operator.attrgetter("content")


def plain_chunks(
    model: Any, messages: Sequence[BaseMessage], config: RunnableConfig | None
) -> AsyncIterator[AIMessageChunk] | None:
    """``model.astream(messages, config)``'s chunks read from the provider directly; None when
    ``astream`` must run (see the module's docstring)."""
    bound, kwargs = model, {}
    if isinstance(model, RunnableBinding):
        bound, kwargs = model.bound, dict(model.kwargs)
        config = merge_configs(model.config, config)
    if not getattr(type(bound), PLAIN_STREAMING, False) or bound.rate_limiter is not None:
        return None
    if bound.output_version == "v1" or not bound._should_stream(async_api=True, **{**kwargs, "stream": True}):
        return None
    if not _text_only(bound, messages):
        return None
    if _traced(bound, ensure_config(config)):
        return None
    for key in _TRACING_ONLY:
        kwargs.pop(key, None)
    return _chunks(bound, list(messages), kwargs)


def _text_only(model: Any, messages: Sequence[BaseMessage]) -> bool:
    """Every message's content is a plain string: asked of the model when it keeps the answer per
    conversation (``text_only``), else read at C speed (a request of 1,000 messages)."""
    text_only = getattr(model, TEXT_ONLY, None)
    if callable(text_only):
        return bool(text_only(messages))
    return set(map(type, map(_CONTENT, messages))) <= {str}


def _traced(model: Any, config: Mapping[str, Any]) -> bool:
    """Some callback handler would see the call (the same manager ``astream`` configures)."""
    manager = AsyncCallbackManager.configure(
        config.get("callbacks"), model.callbacks, model.verbose, config.get("tags"), model.tags,
        config.get("metadata"), model.metadata,
    )
    return bool(manager.handlers)


async def _chunks(model: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AsyncIterator[AIMessageChunk]:
    run_id = f"{LC_ID_PREFIX}-{uuid.uuid4()}"
    last: AIMessageChunk | None = None
    async for generation in model._astream(messages, **kwargs):
        message = cast(AIMessageChunk, generation.message)  # as astream gives it
        if message.id is None:
            message.id = run_id
        info = generation.generation_info or {}
        message.response_metadata = {
            **{key: value for key, value in info.items() if key != GATEWAY_METADATA_RESPONSE_KEY},
            **message.response_metadata,
        }
        last = message
        yield message
    if last is not None and not last.chunk_position:
        yield AIMessageChunk(content="" if isinstance(last.content, str) else [], chunk_position="last", id=run_id)
