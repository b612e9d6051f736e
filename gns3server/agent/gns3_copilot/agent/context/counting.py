"""Token accounting in the OpenAI chat format.

A provider bills (and limits) what it receives, not just ``message.content``: each
message is framed by special tokens, carries its role, and an assistant message
carries its tool calls as function names plus JSON arguments. We follow the rules
of OpenAI's cookbook ("How to count tokens with tiktoken"), whose example
conversations reproduce the API-reported prompt tokens exactly:

- 3 tokens of framing per message (+1 when it has a ``name``),
- every string field as sent: role, content, name, ``tool_call_id``,
- 3 tokens priming the reply, once per request.

Tool definitions reach an OpenAI model rendered as TypeScript-like declarations
inside the system message (``namespace functions { type name = (_: {...}) => any; }``,
see :mod:`.openai_tools`); :meth:`TokenCounter.tools` counts that rendering when
``style="openai"`` and the JSON schema (an over-estimate) for other providers.

What the cookbook does not publish we estimate on the safe side and say so:
tool calls cost their function name, their JSON arguments and 3 framing tokens each;
an image block costs :data:`IMAGE_TOKENS` (OpenAI's price of a high-detail
512x512-tiled 1024px image: 85 + 4 x 170); other non-text blocks their JSON.

Per-message counts are memoised by content (an LRU keyed by what the provider
would receive), so re-counting a long history costs dictionary look-ups: message
objects rebuilt from a checkpoint hit the cache just like the originals. A message
object seen before is recognised by identity first (a weak reference: the counter
keeps no message alive), so a call on a long history whose objects the checkpointer
kept does not even build their content keys; what is derived from one (its masked
or capped copy) is kept with it the same way, the same copy on every call. The
cache is thread-safe: the agent prepares requests in worker threads. Its keys keep
message texts alive, so it is bounded by the memory they take (``cache_bytes``) as
well as by entries: a server that has seen many long tool outputs does not keep
them all for its lifetime. An entry's size is ``sys.getsizeof`` of every object
of its key and value plus a fixed overhead, taken once the value is computed: a
Python string takes 1, 2 or 4 bytes per character (its widest character decides),
plus the UTF-8 copy that encoding it made of a non-ASCII string, so neither its
length nor its UTF-8 size bounds what it holds (a CJK text takes 5 bytes per
character once counted, an emoji 8).
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from .identity import IdentityMemo
from .openai_tools import OPENAI_TOOLS_FRAMING, render_functions
from .tokenizer import DEFAULT_ENCODING, get_encoding

log = logging.getLogger(__name__)

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
TOKENS_PER_TOOL_CALL = 3
IMAGE_TOKENS = 765
TOOL_FALLBACK_TOKENS = 1000

_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
_IMAGE_BLOCKS = {"image_url", "image", "input_image"}


def role_of(message: BaseMessage) -> str:
    """The OpenAI role a LangChain message is sent as."""
    role = _ROLES.get(message.type)
    if role is None:
        role = getattr(message, "role", None) or ("assistant" if isinstance(message, AIMessage) else message.type)
    return str(role)


def json_text(value: Any) -> str:
    """Serialise like the OpenAI clients do (UTF-8 kept, default separators)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _block_text(block: Any) -> str | None:
    """The text of a content block, or None when it is not a text block."""
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") in ("text", "input_text", "output_text"):
        return str(block.get("text", ""))
    return None


def content_text(content: str | Sequence[Any]) -> str:
    """All text of a message content (string or list of blocks), blocks joined."""
    if isinstance(content, str):
        return content
    return "".join(t for t in (_block_text(b) for b in content) if t is not None)


def _tool_calls(message: BaseMessage) -> list[tuple[str, str]]:
    """(name, JSON arguments) of every call the provider will receive, invalid ones too."""
    if not isinstance(message, AIMessage):
        return []
    calls = [(str(c.get("name") or ""), json_text(c.get("args", {}))) for c in message.tool_calls]
    calls += [(str(c.get("name") or ""), str(c.get("args") or "")) for c in message.invalid_tool_calls]
    return calls


def tool_call_id_of(message: BaseMessage) -> Any:
    """The ``tool_call_id`` a message carries (its field, or an extra one), None when it has none.

    What ``getattr(message, "tool_call_id", None)`` gives for a message, without its failing
    look-up on one that has none: pydantic answers that by raising inside its ``__getattr__``
    (~2 us a message; a tenth of the hook's first call on a long history read after a restart).
    """
    found = message.__dict__.get("tool_call_id", _ABSENT)
    if found is not _ABSENT:
        return found
    extra = message.__pydantic_extra__
    return extra.get("tool_call_id") if extra else None


_ABSENT = object()


def _content_key(content: str | Sequence[Any]) -> Hashable:
    return content if isinstance(content, str) else ("blocks", json_text(content))


def message_key(message: BaseMessage) -> Hashable:
    """A hashable fingerprint of what a message sends (not its object identity).

    A text message of the three classes that carry no tool calls has its key made directly (the
    same tuple): the hook's first call on a history read back after a restart keys every message.
    """
    content = message.content
    role = _TEXT_ROLES.get(type(message))
    if role is not None and type(content) is str:
        return (role, content, message.name, (), tool_call_id_of(message))
    return (
        role_of(message),
        _content_key(content),
        message.name,
        tuple(_tool_calls(message)),
        tool_call_id_of(message),
    )


_TEXT_ROLES: dict[type[BaseMessage], str] = {HumanMessage: "user", SystemMessage: "system", ToolMessage: "tool"}


DEFAULT_CACHE_BYTES = 32 * 1024 * 1024
"""Bytes of memory the count cache may keep alive (its entries as :func:`held_bytes` measures them)."""
ENTRY_OVERHEAD = 200
"""Bytes of an entry besides its key and value: the ordered dict's slot and link, the (value, size) pair."""


def held_bytes(*objects: Any) -> int:
    """Memory ``objects`` take, tuples walked: ``sys.getsizeof`` of each (a string's own characters and
    the UTF-8 copy made of it, if any). Objects shared with others (interned names, small ints) count
    in full: the bound errs on the safe side."""
    size = 0
    stack = list(objects)
    while stack:
        item = stack.pop()
        size += sys.getsizeof(item)
        if isinstance(item, tuple):
            stack.extend(item)
    return size


class TokenCounter:
    """Counts tokens of text, messages and tool schemas for one encoding."""

    def __init__(
        self,
        encoding: str | tiktoken.Encoding = DEFAULT_ENCODING,
        cache_size: int = 50_000,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.encoding = get_encoding(encoding) if isinstance(encoding, str) else encoding
        self._cache: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()  # key -> (value, size)
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._cached_bytes = 0
        # Hooks of concurrent runs share counters and run in worker threads.
        self._lock = threading.Lock()
        # What was derived from each message object, kept with it: see derived().
        self._objects = IdentityMemo()

    def text(self, text: str) -> int:
        """Tokens of plain text; special-token look-alikes count as ordinary text."""
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def known_text(self, text: str) -> int:
        """:meth:`text`, kept in the cache: for a text sent again and again (the topology, a prompt)."""
        count: int = self.remembered(("text", text), functools.partial(self.text, text))
        return count

    def content(self, content: str | Sequence[Any]) -> int:
        """Tokens of a message content: a string or a list of content blocks."""
        if isinstance(content, str):
            return self.text(content)
        total = 0
        for block in content:
            text = _block_text(block)
            if text is not None:
                total += self.text(text)
            elif isinstance(block, Mapping) and block.get("type") in _IMAGE_BLOCKS:
                total += IMAGE_TOKENS
            else:
                total += self.text(json_text(block))
        return total

    def _count_uncached(self, message: BaseMessage) -> int:
        total = TOKENS_PER_MESSAGE + self.text(role_of(message)) + self.content(message.content)
        if message.name:
            total += TOKENS_PER_NAME + self.text(message.name)
        tool_call_id = tool_call_id_of(message)
        if tool_call_id:
            total += self.text(str(tool_call_id))
        for name, arguments in _tool_calls(message):
            total += TOKENS_PER_TOOL_CALL + self.text(name) + self.text(arguments)
        return total

    def message(self, message: BaseMessage) -> int:
        """Tokens one message costs in a request (framing included), memoised by object and by content."""
        count: int = self.derived(message, "tokens", lambda: self.remembered(
            message_key(message), lambda: self._count_uncached(message)))
        return count

    def derived(self, message: BaseMessage, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept under ``key`` for as long as the object ``message`` lives.

        For what is a pure function of a message (its count, its masked copy): a message
        object seen at the previous call costs a look-up, not its content key. Messages are
        never changed in place (the copilot copies them), so the object stands for its content.
        """
        return self._objects.get(message, key, compute)

    def remembered(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept in the counter's cache under ``key``; ``key`` and the value are
        made of strings, numbers and tuples, so that :func:`held_bytes` measures what they keep alive.

        One cache, bounded by entries and bytes, for every per-encoding result derived from
        message texts (counts, capped outputs): nothing keeps long texts alive beside it.
        """
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached[0]
        value = compute()
        # Measured after computing: encoding a non-ASCII text gave it a UTF-8 copy it now keeps.
        size = ENTRY_OVERHEAD + held_bytes(key, value)
        if size > self._cache_bytes:
            return value  # bigger than the whole cache: computed, not kept
        with self._lock:
            if key not in self._cache:
                self._cache[key] = (value, size)
                self._cached_bytes += size
            while len(self._cache) > self._cache_size or self._cached_bytes > self._cache_bytes:
                _, (_, dropped) = self._cache.popitem(last=False)
                self._cached_bytes -= dropped
        return value

    def cache_info(self) -> tuple[int, int]:
        """(entries, bytes) of the count cache; the bytes as :data:`DEFAULT_CACHE_BYTES` bounds them."""
        with self._lock:
            return len(self._cache), self._cached_bytes

    def messages(self, messages: Iterable[BaseMessage]) -> int:
        """Tokens of a whole request's messages, reply priming included."""
        return sum(self.message(m) for m in messages) + REPLY_PRIMING_TOKENS

    def tool(self, tool: Any) -> int:
        """Tokens of one tool definition as the provider gets it (its JSON schema)."""
        return self.text(json_text(convert_to_openai_tool(tool)))

    def tools(self, tools: Iterable[Any], style: str = "json") -> int:
        """Tokens of all tool definitions; a tool we cannot convert counts as 1000.

        ``style="openai"``: as OpenAI renders them to its models (a TypeScript-like
        namespace in the system message); ``"json"``: their JSON schemas, the safe
        estimate for providers whose rendering we do not know.
        """
        total = 0
        readable: list[dict[str, Any]] = []
        for tool in tools:
            try:
                schema = convert_to_openai_tool(tool)
                if style == "openai":
                    readable.append(schema)
                else:
                    text = json_text(schema)
                    total += self.known_text(text)
            except Exception as exc:  # noqa: BLE001  # any foreign schema error: estimate, never fail a call
                name = getattr(tool, "name", None) or type(tool).__name__
                log.warning("Cannot estimate tokens of tool %s (%s); assuming %d", name, exc, TOOL_FALLBACK_TOKENS)
                total += TOOL_FALLBACK_TOKENS
        if readable:
            rendered = render_functions(readable)
            total += self.known_text(rendered) + OPENAI_TOOLS_FRAMING
        return total
