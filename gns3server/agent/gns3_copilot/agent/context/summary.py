"""The running summary of the turns a cut removed from the request.

After an hour of troubleshooting the oldest turns no longer fit: without a
summary the copilot forgets which devices were checked and what was changed.
When the window (``window.py``) plans its next cut, the same model is asked, in
the background, to fold the turns that cut will drop into the previous summary;
at the cut the window starts where that summary ends, and the summary opens the
first message sent from then on. The system message stays as it is, and the
prefix changes once per cut, as it must anyway. A summary that was not ready
for its cut opens the question after it lands (new text in that request), the
one before it staying where it was until the next cut (:func:`place_summaries`).

Everything here is pure: the graph makes the model call (with a timeout, beside
the conversation: ``summaries/writer.py``) and keeps the result in its state (``{"text", "until", "until_id", "turns"}``:
the summary covers ``messages[:until]``, ``turns`` user turns of them). Where the
summaries sent sit is remembered in the window state (``summaries``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from .counting import TokenCounter, content_text, json_text
from .history import truncate_text

log = logging.getLogger(__name__)

SUMMARY_HEADING = "### SUMMARY OF THE EARLIER CONVERSATION"
SUMMARY_NOTE = "({turns} earlier turn(s) are no longer shown; this summary of them was written as they left.)"
SUMMARY_END = "### END OF THE SUMMARY; THE CONVERSATION CONTINUES WITH THE USER'S MESSAGE:"
# Tokens the joint between the summary and the message it opens may add (BPE merges across it).
SUMMARY_JOIN_TOKENS = 2
# What a summary may cost, and what the request that writes it may send (tokens).
SUMMARY_MAX_TOKENS = 600
SUMMARY_INPUT_MAX_TOKENS = 6000
# A tool output is cut to this in the summary request: the summary keeps findings, not dumps.
SUMMARY_TOOL_OUTPUT_TOKENS = 300
SUMMARY_INSTRUCTIONS = (
    "You keep the running notes of a network troubleshooting session in GNS3. "
    "Rewrite the notes so that they include what the conversation excerpt below adds. "
    "Keep, as short bullet points: the devices involved (by name) and what is known about each; "
    "findings (addresses, interface and routing states, errors seen); changes made to devices or the "
    "topology and whether they worked; the user's goal and the open questions. "
    "Drop greetings, repetition and raw command output. At most {words} words. Reply with the notes only."
)


def summary_section(summary: Mapping[str, Any] | None) -> str:
    """The text that opens the first message of the history sent (empty without a summary)."""
    if not isinstance(summary, Mapping):
        return ""
    text = summary.get("text")
    if not isinstance(text, str) or not text.strip():
        return ""
    note = SUMMARY_NOTE.format(turns=summary.get("turns", 0))
    return f"{SUMMARY_HEADING}\n{note}\n{text.strip()}\n{SUMMARY_END}\n\n"


def with_summary(history: Sequence[BaseMessage], section: str, at_id: str | None = None) -> list[BaseMessage]:
    """``history`` with ``section`` put at the start of the user message whose id is ``at_id``
    (see ``context_manager.summary_anchor``), or of its first message without one.

    Not in the system message, whose prefix then stays cacheable when the summary
    changes; not a message of its own, which strict chat templates (alternating
    roles, one system message) reject. On the question that first sent it, it is part of
    what that request added anyway: a new summary costs no cache miss of its own.
    """
    messages = list(history)
    if not section or not messages:
        return messages
    index = next((i for i, m in enumerate(messages) if at_id and m.id == at_id and isinstance(m, HumanMessage)), 0)
    first = messages[index]
    content: Any = first.content
    if isinstance(content, str):
        content = section + content
    else:
        content = [{"type": "text", "text": section}, *content]
    messages[index] = first.model_copy(update={"content": content})
    return messages


@dataclass(frozen=True)
class Placement:
    """A summary as one request sends it: its text, what it covers, the user message it opens.

    ``at_id`` ``""`` means the first message of the history (messages without ids).
    """

    at_id: str
    until: int
    turns: int
    text: str

    def section(self) -> str:
        return summary_section({"text": self.text, "turns": self.turns})


def _placement(value: Any) -> Placement | None:
    if not isinstance(value, Mapping):
        return None
    at_id, until, turns, text = (value.get(k) for k in ("at_id", "until", "turns", "text"))
    if isinstance(at_id, str) and isinstance(until, int) and isinstance(turns, int) and isinstance(text, str):
        return Placement(at_id, until, turns, text)
    return None


def placed_before(window: Any, summary: Mapping[str, Any] | None) -> list[Placement]:
    """The summaries the previous request sent, oldest first (from its window state)."""
    if not isinstance(window, Mapping):
        return []
    stored = window.get("summaries")
    if isinstance(stored, list):
        return [p for p in map(_placement, stored) if p is not None]
    # A window saved before two summaries could be sent: only where the current one sat.
    at_id = window.get("summary_at_id")
    if summary and isinstance(at_id, str) and window.get("summary_until") == summary.get("until"):
        return [_latest(summary, at_id)]
    return []


def _latest(summary: Mapping[str, Any], at_id: str) -> Placement:
    return Placement(at_id, int(summary["until"]), int(summary.get("turns", 0) or 0), str(summary["text"]))


def place_summaries(
    messages: Sequence[BaseMessage], sent: Sequence[BaseMessage], summary: Mapping[str, Any] | None,
    before: Sequence[Placement], cut: bool, start: int,
) -> list[Placement]:
    """Where summaries open user messages in this request (oldest first; at most two).

    Chosen so that a summary never changes what the previous request sent:

    - at a cut (``cut``: the history sent starts later than before, at ``start``)
      everything after the system message is sent anew anyway: the summary opens the
      first user message sent, and stays there until the next cut;
    - a summary written ahead of a planned cut (it covers turns still sent) waits for
      that cut; the one sent before stays where it is;
    - a summary that lands between cuts (the planned cut came before it) opens the
      question that starts a turn (the last message: new text in that request anyway).
      The one it follows stays where it is until the next cut, so the prefix holds; the
      newer one already contains its notes, the older costs its tokens until then.
      Within a tool round a new summary waits for the next question.

    ``""`` (messages without ids, built by hand): the summary opens the history.
    """
    if not summary:
        return []
    sent_ids = [m.id for m in sent if isinstance(m, HumanMessage)]
    current = summary if int(summary["until"]) <= start else None
    if cut:
        chosen = _latest(current, "") if current else (before[-1] if before else None)
        return [replace(chosen, at_id=sent_ids[0] or "")] if chosen and sent_ids else []
    kept = [p for p in before if p.at_id in sent_ids]
    if current is None or kept and kept[-1].until == current["until"]:
        return kept
    last = messages[-1] if messages else None
    if not isinstance(last, HumanMessage):
        return kept  # a tool round: a new summary waits for the next question
    if last.id is None:
        return [_latest(current, "")]
    if last.id not in sent_ids:
        return kept
    return [*kept[-1:], _latest(current, last.id)]


def apply_placements(history: Sequence[BaseMessage], placements: Sequence[Placement]) -> list[BaseMessage]:
    """``history`` with each placement's section opening its user message."""
    messages = list(history)
    for placement in placements:
        messages = with_summary(messages, placement.section(), placement.at_id or None)
    return messages


def placements_state(placements: Sequence[Placement]) -> dict[str, Any]:
    """What the window state keeps of this request's summaries (so the next request keeps them)."""
    if not placements:
        return {}
    newest = placements[-1]
    return {"summaries": [asdict(p) for p in placements], "summary_at_id": newest.at_id, "summary_until": newest.until}


def restore_summary(value: Any, messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
    """The stored summary if it still matches ``messages`` (else None, with a log line)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("text"), str):
        return None
    until = value.get("until")
    if not isinstance(until, int) or not 0 < until <= len(messages):
        log.warning("Stored conversation summary does not match the history; leaving it out")
        return None
    if until < len(messages) and value.get("until_id") is not None and messages[until].id != value.get("until_id"):
        log.warning("Stored conversation summary does not match the history; leaving it out")
        return None
    return dict(value)


def _line(message: BaseMessage, counter: TokenCounter) -> str:
    text = content_text(message.content)
    if isinstance(message, ToolMessage):
        text = truncate_text(text, SUMMARY_TOOL_OUTPUT_TOKENS, counter)
        return f"[tool result {message.name or ''}]: {text}"
    if isinstance(message, AIMessage):
        calls = " ".join(f"{c['name']}({json_text(c.get('args') or {})})" for c in message.tool_calls)
        return f"[assistant]: {text}" + (f" [called: {calls}]" if calls else "")
    if isinstance(message, HumanMessage):
        return f"[user]: {text}"
    return f"[{message.type}]: {text}"


def summary_request(
    previous: str | None, dropped: Sequence[BaseMessage], counter: TokenCounter,
    max_input_tokens: int = SUMMARY_INPUT_MAX_TOKENS, max_tokens: int = SUMMARY_MAX_TOKENS,
) -> list[BaseMessage]:
    """The messages asking the model to fold ``dropped`` into ``previous``, at most ``max_input_tokens``.

    The excerpt is cut head-and-tail (with the visible marker) when too long, so
    the request always fits whatever the size of what was dropped.
    """
    instructions = SUMMARY_INSTRUCTIONS.format(words=max(50, int(max_tokens * 0.7)))
    notes = previous.strip() if previous and previous.strip() else "(none yet)"
    excerpt = "\n".join(_line(m, counter) for m in dropped)
    fixed = counter.text(instructions) + counter.text(notes) + 40
    room = max(200, max_input_tokens - fixed)
    if counter.text(notes) > max_input_tokens // 2:
        notes = truncate_text(notes, max_input_tokens // 2, counter)
        room = max(200, max_input_tokens - counter.text(instructions) - counter.text(notes) - 40)
    excerpt = truncate_text(excerpt, room, counter)
    return [
        SystemMessage(instructions),
        HumanMessage(f"Current notes:\n{notes}\n\nConversation excerpt to add:\n{excerpt}"),
    ]


def summary_bounds(message_budget: int) -> tuple[int, int]:
    """(summary tokens, summary request tokens) for a model whose message budget is ``message_budget``.

    The summary may take an eighth of the budget (at most :data:`SUMMARY_MAX_TOKENS`);
    its request fits the budget (at most :data:`SUMMARY_INPUT_MAX_TOKENS`).
    """
    max_tokens = max(100, min(SUMMARY_MAX_TOKENS, message_budget // 8))
    return max_tokens, max(500, min(SUMMARY_INPUT_MAX_TOKENS, message_budget - max_tokens))


def count_turns(messages: Sequence[BaseMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, HumanMessage))


def clean_summary(text: str, counter: TokenCounter, max_tokens: int = SUMMARY_MAX_TOKENS) -> str:
    """The model's reply as stored: stripped, and cut to ``max_tokens`` when longer."""
    return truncate_text(text.strip(), max_tokens, counter)
