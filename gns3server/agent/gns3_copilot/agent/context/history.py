"""Fitting a conversation history into a token budget without breaking provider rules.

Providers reject a request whose assistant tool call is not answered by a tool
message right after it, or whose tool message has no call; some reject a history
that does not start with a user message. A history saved by a crashed or aborted
run can break those rules, and naive trimming breaks them too (it can cut between
a call and its result). So we work on *units* and *turns*:

- a unit is a user message, or an assistant message together with the answers to
  its tool calls (never split);
- a turn is a user message and the units that follow it until the next one.

:func:`repair` builds units from raw messages, answering unanswered calls with a
short synthetic result and dropping results that have no call. :func:`fit_history`
then keeps the latest user message always, the units of the latest turn newest
first, and older turns whole, newest first, while they fit. An item too large
for what is left is cut head-and-tail with a visible marker instead of vanishing (a tool's
JSON output inside its structure: ``cutting.py``).
Everything happens on copies: the input messages are never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .counting import TokenCounter, content_text, role_of
from .cutting import MIN_KEPT_TOKENS, TRUNCATION_MARKER, truncate_output, truncate_text

INTERRUPTED_TOOL_RESULT = "[interrupted: no result was recorded for this tool call]"
NO_USER_MESSAGE = "[No user message was recorded; continue from the context above.]"

Unit = list[BaseMessage]


@dataclass
class RepairStats:
    """What :func:`repair` changed in the prepared copy."""

    interrupted_calls: int = 0
    orphan_results: int = 0


@dataclass
class Turn:
    human: BaseMessage | None
    units: list[Unit] = field(default_factory=list)


@dataclass
class FitResult:
    """The kept history (system message excluded) and how it was obtained."""

    messages: list[BaseMessage]
    tokens: int
    truncated: list[dict[str, Any]]
    over_budget: bool
    prepared: dict[int, BaseMessage] = field(default_factory=dict)
    """What ``prepare`` made of each message it was applied to, by ``id()`` of the message."""


def _call_ids(message: AIMessage) -> list[tuple[str, str]]:
    """(id, name) of every call the provider expects an answer to."""
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    return [(str(c.get("id") or ""), str(c.get("name") or "")) for c in calls]


def _is_empty(message: BaseMessage) -> bool:
    return not message.content or (isinstance(message.content, str) and not message.content.strip())


def repair(messages: Sequence[BaseMessage]) -> tuple[list[Unit], RepairStats]:
    """Group messages into units, mending broken tool-call pairing on the way."""
    stats = RepairStats()
    units: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if isinstance(message, HumanMessage):
            units.append([message])
        elif isinstance(message, AIMessage):
            calls = _call_ids(message)
            if not calls:
                if not _is_empty(message):  # an empty one has nothing to send; some providers reject it
                    units.append([message])
                continue
            answers: dict[str, BaseMessage] = {}
            while i < n and isinstance(result := messages[i], ToolMessage):
                i += 1
                if result.tool_call_id in dict(calls) and result.tool_call_id not in answers:
                    answers[result.tool_call_id] = result
                else:
                    stats.orphan_results += 1
            unit: Unit = [message]
            for call_id, name in calls:
                answer = answers.get(call_id)
                if answer is None:
                    stats.interrupted_calls += 1
                    answer = ToolMessage(
                        content=INTERRUPTED_TOOL_RESULT, tool_call_id=call_id, name=name or None, status="error"
                    )
                unit.append(answer)
            units.append(unit)
        elif isinstance(message, ToolMessage):
            stats.orphan_results += 1  # not right after its call: providers reject it
        # Anything else is dropped: system messages (we send our own) and legacy types.
    return units, stats


def split_turns(units: Sequence[Unit]) -> list[Turn]:
    """Group units into turns, each starting at a user message (the first may not)."""
    turns: list[Turn] = []
    current = Turn(human=None)
    for unit in units:
        if isinstance(unit[0], HumanMessage):
            if current.human is not None or current.units:
                turns.append(current)
            current = Turn(human=unit[0])
        else:
            current.units.append(unit)
    if current.human is not None or current.units:
        turns.append(current)
    return turns


def _overhead(message: BaseMessage, counter: TokenCounter) -> int:
    """Tokens of a message other than its content."""
    return counter.message(message) - counter.content(message.content)


def min_cost(message: BaseMessage, counter: TokenCounter) -> int:
    """What a message costs once cut to nothing but the marker."""
    return _overhead(message, counter) + counter.text(TRUNCATION_MARKER.format(cut=10**6))


def truncate_message(message: BaseMessage, max_tokens: int, counter: TokenCounter) -> BaseMessage:
    """A copy of ``message`` whose cost is at most ``max_tokens`` (content cut head-and-tail; a tool's
    JSON output inside its structure, so that it is still JSON)."""
    budget = max(0, max_tokens - _overhead(message, counter))
    if isinstance(message, ToolMessage) and isinstance(message.content, str):
        text = truncate_output(message.content, budget, counter)
    else:
        text = truncate_text(content_text(message.content), budget, counter, counter.content(message.content))
    return message.model_copy(update={"content": text})


def _describe(before: BaseMessage, after: BaseMessage, counter: TokenCounter) -> dict[str, Any]:
    return {
        "role": role_of(before),
        "name": before.name,
        "tokens_before": counter.message(before),
        "tokens_after": counter.message(after),
    }


def _unit_cost(unit: Unit, counter: TokenCounter) -> int:
    return sum(counter.message(m) for m in unit)


def _shrink_unit(unit: Unit, room: int, counter: TokenCounter) -> Unit | None:
    """Cut the texts of a unit so that it fits ``room``, or None if that leaves too little."""
    sizes = {i: counter.content(m.content) for i, m in enumerate(unit)}
    cuttable = [i for i, m in enumerate(unit) if sizes[i] > MIN_KEPT_TOKENS]
    if not cuttable:
        return None
    fixed = sum(counter.message(m) for i, m in enumerate(unit) if i not in cuttable)
    fixed += sum(min_cost(unit[i], counter) for i in cuttable)
    spare = room - fixed
    if spare < MIN_KEPT_TOKENS * len(cuttable):
        return None
    # Water-filling: small items keep all they have, big ones share what remains.
    allowance: dict[int, int] = {}
    left = sorted(cuttable, key=sizes.__getitem__)
    while left:
        i = left.pop(0)
        allowance[i] = min(sizes[i], spare // (len(left) + 1))
        spare -= allowance[i]
    shrunk = list(unit)
    for i, allowed in allowance.items():
        if allowed < sizes[i]:
            shrunk[i] = truncate_message(unit[i], min_cost(unit[i], counter) + allowed, counter)
    return shrunk


def fit_history(
    units: Sequence[Unit], available: int, counter: TokenCounter,
    prepare: Callable[[BaseMessage], BaseMessage] | None = None, cut_margin: int = 0,
) -> FitResult:
    """Keep what fits in ``available`` tokens, by the rules in the module docstring.

    ``prepare`` (say, capping a tool output) is applied to each message when it is
    considered, newest first: what lies beyond the budget is never prepared (nor counted).
    An item cut to fit leaves ``cut_margin`` tokens of the room unused: a cut fills its
    room to the last token, so the room it gets must hold whichever estimate of the rest
    of the request is right (the caller's: tool definitions measured below our count).
    """
    prepared: dict[int, BaseMessage] = {}

    def ready(unit: Unit) -> Unit:
        if prepare is None:
            return unit
        return [prepared[id(m)] if id(m) in prepared else prepared.setdefault(id(m), prepare(m)) for m in unit]

    turns = [Turn(t.human, t.units) for t in split_turns(units)]
    latest = turns[-1] if turns else Turn(human=None)
    if latest.human is not None:
        latest.human = ready([latest.human])[0]
    question = latest.human if latest.human is not None else HumanMessage(content=NO_USER_MESSAGE)
    truncated: list[dict[str, Any]] = []

    cost = counter.message(question)
    if cost > available:
        if min_cost(question, counter) > available:
            # Not even the question fits beside the system message: send it whole (seed).
            return FitResult([question], cost, truncated, over_budget=True, prepared=prepared)
        # From a cut on, the room is the smaller one: nothing after the cut may use the margin.
        limit = max(min_cost(question, counter), available - cut_margin)
        cut = truncate_message(question, limit, counter)
        truncated.append(_describe(question, cut, counter))
        question, cost = cut, counter.message(cut)
        available, cut_margin = limit, 0
    room = available - cost

    newest_units: list[Unit] = []
    complete = True
    for unit in reversed(latest.units):
        unit = ready(unit)
        unit_cost = _unit_cost(unit, counter)
        if unit_cost > room:
            complete = False
            shrunk = _shrink_unit(unit, max(0, room - cut_margin), counter)
            if shrunk is None:
                break
            truncated.extend(_describe(a, b, counter) for a, b in zip(unit, shrunk) if a is not b)
            unit, unit_cost = shrunk, _unit_cost(shrunk, counter)
        newest_units.append(unit)
        room -= unit_cost
        if not complete:
            break

    older: list[tuple[BaseMessage, list[Unit]]] = []  # (question, units) of each earlier turn kept
    if complete:
        for turn in reversed(turns[:-1]):
            if turn.human is None:
                break
            human, turn_units = ready([turn.human])[0], [ready(u) for u in turn.units]
            turn_cost = counter.message(human) + sum(_unit_cost(u, counter) for u in turn_units)
            if turn_cost > room:
                break
            older.append((human, turn_units))
            room -= turn_cost

    kept: list[BaseMessage] = []
    for human, turn_units in reversed(older):
        kept.append(human)
        kept.extend(m for u in turn_units for m in u)
    kept.append(question)
    kept.extend(m for u in reversed(newest_units) for m in u)
    return FitResult(kept, available - room, truncated, over_budget=False, prepared=prepared)
