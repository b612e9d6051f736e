"""OpenAI-protocol requests whose messages the SDK does not walk again on every call.

``langchain-openai`` builds the request as plain JSON-ready dicts, then hands them to
the OpenAI SDK's ``chat.completions.create``, which passes every argument through its
request transform (``async_maybe_transform``): each message is checked against every
member of the SDK's message union to rename aliased keys and format dates or files,
of which chat messages and tool definitions have none. That walk runs on the event
loop at ~0.2 ms per message: 100-200 ms per model call of a long conversation, twice
in a tool turn, for a body that comes out unchanged.

The SDK's documented ``extra_body`` is merged into the JSON body as it is, after the
transform; so the messages and the tool definitions go there, and the transformed
arguments carry an empty message list. The body sent is the same JSON.

``langchain-openai``'s own conversion of each message to its dict grows with the
conversation too (24 ms a call at 500 turns). A model now outlives its run (the
agent's assembly keeps one per user and LLM profile), and the history's message
objects outlive the calls (the checkpointer and the context hook keep them), so each
object's dict is kept with it (:class:`~..context.identity.IdentityMemo`, weak) and
only the messages not seen before are converted: a plain one here (:mod:`.openai_plain`, the
same dict), any other by ``langchain-openai`` itself.

Imported only when a model is built (``langchain_openai`` is heavy).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, ClassVar, Self

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr, model_validator

from ..context.identity import MISSING, IdentityMemo, PositionMemo
from .openai_plain import plain_message_dict
from .openai_wire import DictChunkCompletions, EncodedMessages, encode_json

__all__ = ["LeanChatOpenAI", "remembered_payload", "untransformed"]

_KEPT = "openai-request"  # (the message's request dict, its JSON or None)
_DICT, _JSON = operator.itemgetter(0), operator.itemgetter(1)

# The arguments that are already plain JSON and the largest: sent through ``extra_body``.
PASSED_AS_IS = ("messages", "tools")


def untransformed(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` (``ChatOpenAI``'s keyword arguments to ``create``) with its messages and tool
    definitions in ``extra_body``; unchanged for a Responses API or structured-output request,
    which has no ``messages`` or goes through another SDK call."""
    if "messages" not in payload or "response_format" in payload:
        return payload
    extra = dict(payload.get("extra_body") or {})
    moved = {key: payload[key] for key in PASSED_AS_IS if key in payload and key not in extra}
    if not moved:
        return payload
    lean = {key: value for key, value in payload.items() if key not in moved}
    lean["messages"] = []  # required by ``create``; replaced by ``extra_body``'s in the body
    lean["extra_body"] = {**moved, **extra}
    return lean


def _plain_text(messages: list[BaseMessage]) -> list[bool]:
    return [type(message.content) is str for message in messages]


def _kept(message_dict: Any) -> tuple[Any, bytes | None]:
    """A message's request dict and its JSON (None: not plain JSON, the SDK's encoder must send it)."""
    try:
        return message_dict, encode_json(message_dict)
    except (TypeError, ValueError):
        return message_dict, None


class _NotPerMessage(Exception):
    """The payload's messages are not one converted dict per message, in order (the Responses API's)."""


class _NotMessages(TypeError):
    """A request list holds something that is not a message object yet (LangChain converts it)."""


def remembered_payload(
    build: Callable[..., dict[str, Any]], messages: list[BaseMessage], memo: IdentityMemo,
    stop: list[str] | None, kwargs: dict[str, Any], positions: PositionMemo | None = None,
) -> dict[str, Any]:
    """``build(messages, stop=..., **kwargs)`` (``ChatOpenAI``'s payload) with the dict of each
    message object ``memo`` has seen taken from it: ``build`` converts only the others.

    ``build`` converts message by message, in order; a payload whose messages are not that
    (the Responses API's) is built whole, as before. Each message's dict and JSON are kept
    together; with ``positions``, a message where the previous request of the conversation had
    the same object is not looked up again either (:class:`PositionMemo`).

    Raises :class:`_NotMessages` when ``messages`` holds anything but message objects.
    """
    built: dict[str, Any] = {}

    def kept_for(items: list[BaseMessage]) -> list[tuple[Any, bytes | None]]:
        if not all(map(isinstance, items, repeat(BaseMessage))):
            raise _NotMessages
        known = memo.peek_all(items, _KEPT)
        new = [m for m, kept in zip(items, known, strict=True) if kept is MISSING]
        if not new:
            return known
        built.update(build(new, stop=stop, **kwargs))
        converted = built.get("messages")
        if not isinstance(converted, list) or len(converted) != len(new):
            raise _NotPerMessage
        fresh = iter(converted)
        for index, kept in enumerate(known):
            if kept is MISSING:  # converted in order, one each, even for an object that comes twice
                known[index] = kept = _kept(next(fresh))
                memo.put(items[index], _KEPT, kept)
        return known

    try:
        known = kept_for(messages) if positions is None else positions.values(messages, kept_for)
    except _NotPerMessage:
        return build(messages, stop=stop, **kwargs)
    payload = built or build([], stop=stop, **kwargs)  # the rest of the request: the same for any messages
    if not isinstance(payload.get("messages"), list):
        return build(messages, stop=stop, **kwargs)
    dicts, fragments = list(map(_DICT, known)), list(map(_JSON, known))
    # The body is joined from each message's JSON (:mod:`.openai_wire`), unless one is not plain JSON.
    payload["messages"] = dicts if None in fragments else EncodedMessages(dicts, fragments)
    return payload


class LeanChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose requests skip the SDK's transform of messages and tools, and convert
    each message object once.

    The dicts are shared by the requests that carry the same message: :meth:`_adjusted` sees
    each one once, in the payload of the call that converted it (walking every message of every
    call again cost ~3.5 ms a turn at 500 turns).
    """

    _message_dicts: IdentityMemo = PrivateAttr(default_factory=IdentityMemo)
    # Per conversation (told apart by its first message past the system prompt): its last request.
    _request_positions: PositionMemo = PrivateAttr(default_factory=lambda: PositionMemo(anchor=1))
    _text_positions: PositionMemo = PrivateAttr(default_factory=lambda: PositionMemo(anchor=1))
    plain_streaming: ClassVar[bool] = True
    """Its ``_astream`` may be read without ``astream``'s tracing work when nothing traces (``plain_stream.py``)."""

    @model_validator(mode="after")
    def _joined_bodies_and_dict_chunks(self) -> Self:
        """Bodies joined from each message's JSON, streamed chunks as their JSON dicts, each within
        the chunk timeout, bounded by the stream itself (:mod:`.openai_wire`): ``langchain-openai``'s
        own bound (a task per chunk) is turned off, unless its streams go another way (response
        headers kept, LangSmith's gateway, the Responses API)."""
        if self.async_client is not None and not isinstance(self.async_client, DictChunkCompletions):
            ours = not (self.include_response_headers or self._uses_gateway
                        or self._use_responses_api(dict(self.model_kwargs)))
            self.async_client = DictChunkCompletions(self.async_client, self.root_async_client,
                                                     self.stream_chunk_timeout if ours else None, self.model_name)
            if ours:
                self.stream_chunk_timeout = None
        return self

    @property
    def chunk_timeout(self) -> float | None:
        """Seconds a streamed answer may stay silent between chunks (None or 0: no bound)."""
        if isinstance(self.async_client, DictChunkCompletions) and self.stream_chunk_timeout is None:
            return self.async_client.chunk_timeout
        return self.stream_chunk_timeout

    def _get_request_payload(self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        if type(input_) is list:  # the graph's requests: message objects, each checked when first at its place
            try:
                return untransformed(remembered_payload(self._adjusted_payload, input_, self._message_dicts, stop,
                                                        kwargs, self._request_positions))
            except _NotMessages:
                pass
        messages = self._convert_input(input_).to_messages()
        return untransformed(remembered_payload(self._adjusted_payload, messages, self._message_dicts, stop, kwargs))

    def text_only(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether every message's content is a plain string (``plain_stream.py`` asks before each call),
        each message read when first at its place in the conversation's requests."""
        return all(self._text_positions.values(messages, _plain_text))

    def _adjusted_payload(self, messages: list[BaseMessage], *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        """``ChatOpenAI``'s payload of ``messages``, the plain ones converted here (:mod:`.openai_plain`)."""
        plain = list(map(plain_message_dict, messages))
        others = [message for message, converted in zip(messages, plain, strict=True) if converted is None]
        payload = super()._get_request_payload(others, stop=stop, **kwargs)
        theirs = payload.get("messages")
        if not (isinstance(theirs, list) and len(theirs) == len(others)):  # not one dict per message (Responses)
            return self._adjusted(super()._get_request_payload(messages, stop=stop, **kwargs))
        if len(others) < len(messages):
            converted = iter(theirs)
            payload["messages"] = [next(converted) if mine is None else mine for mine in plain]
        return self._adjusted(payload)

    def _adjusted(self, payload: dict[str, Any]) -> dict[str, Any]:
        """What a subclass changes in ``ChatOpenAI``'s payload before it is sent (nothing here)."""
        return payload
