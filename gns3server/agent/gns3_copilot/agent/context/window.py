"""Which part of the history a request sends, chosen so that prompt caches keep working.

Providers (OpenAI, Anthropic, DeepSeek) bill a request's prefix that repeats the
previous request at a fraction of the price, and local servers (llama.cpp, vLLM,
Ollama) skip re-reading it. Dropping the oldest turn on every call changes
everything after the system message every time, so nothing is reused. Instead:

- the history sent starts at a remembered *cut* (a user message) and grows at the
  end while it fits the budget: consecutive requests share their prefix;
- when it no longer fits, the cut moves forward by whole turns until the history
  takes at most the *low-water mark* (a share of the message budget), and stays
  there until the budget is exceeded again;
- at the same moment, tool outputs of the turns before the last few are *masked*:
  replaced in the request by a one-line stub saying how to get them again (the
  stored history keeps them). The masking boundary, too, only moves at a cut.
  When a cut would leave only the current turn (a small window), the earlier
  turns that fit the whole room are kept instead, every earlier tool output masked.
  A tool output identical to one returned earlier in its turn (a small model making
  the same call again) is sent as a one-line note;
- half-way from the low-water mark to the budget, the next cut is *planned*: the
  turn it will start at is chosen then (so that, by the time the budget is full,
  what follows it is about the low-water mark), so that the running summary of the
  turns it will drop can be written in the background before the cut. At the cut,
  when a summary up to the planned turn has landed, the window starts there
  (``ready``) and the summary arrives with the cut: the prefix changes once per
  cut, not once at the cut and again when the summary lands.

The remembered window is a small dict kept in the graph state (so it is saved
with the session's checkpoint): ``{"start", "start_id", "mask_until"}`` (and
``"planned", "planned_id"`` between a plan and its cut), indexes into the state's
message list (which only grows) plus the ids of the messages there to detect a
history that changed under it.
"""

from __future__ import annotations

import bisect
import functools
import logging
import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .counting import TokenCounter
from .cutting import truncate_output
from .history import FitResult, RepairStats, fit_history, repair

log = logging.getLogger(__name__)

DEFAULT_LOW_WATER = 0.65
# Where, between the low-water mark (0) and the budget (1), the next cut is planned.
PLAN_AHEAD = 0.5
DEFAULT_TOOL_OUTPUT_TURNS = 3
MASK_STUB = (
    "[output of {tool}{target} masked to save context: {tokens} tokens; "
    "call {tool} again{args} to see it again]"
)
# A single tool output may take at most this share of the message budget in a request: at 8K one
# `show running-config` would otherwise be a third of the budget and force a cut at every turn.
# A tenth, not a fifth: the new output is what no cache has seen, so a smaller one keeps more of
# each request cached, and twice the turns fit (bench/cache.py).
TOOL_OUTPUT_SHARE = 0.1
CAP_MARKER = (
    "\n[... {cut} tokens of this output cut here by GNS3 Copilot (one output may take at most a tenth of "
    "the context window); run a narrower command to see the part you need ...]\n"
)
# What stands in for a tool output identical to one returned earlier in the same turn.
REPEAT_STUB = "[the same output as the earlier call of {tool} in this turn returned; not repeated here]"
_REPEAT_MIN_CHARS = 200
# Tool-call arguments that name the device a tool worked on.
_TARGET_KEYS = ("node_name", "device", "device_name", "node", "name", "hostname", "target")
_MAX_STUB_ARGS_CHARS = 160


@dataclass(frozen=True)
class Window:
    """The remembered cut and masking boundary (indexes into the state's messages)."""

    start: int = 0
    start_id: str | None = None
    mask_until: int = 0
    planned: int = 0  # the turn the next cut is planned to start at (0: none planned)
    planned_id: str | None = None

    def as_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"start": self.start, "start_id": self.start_id, "mask_until": self.mask_until}
        if self.planned:
            state.update(planned=self.planned, planned_id=self.planned_id)
        return state


@dataclass(frozen=True)
class WindowPlan:
    """What :func:`plan_window` decided for one request."""

    window: Window
    fit: FitResult
    sent: list[BaseMessage]  # the (masked) messages from the cut on, before fitting
    moved: bool  # the cut or the masking boundary moved in this call
    planned: bool  # the next cut was planned in this call (``window.planned``)
    masked_outputs: int
    masked_tokens_saved: int
    interrupted_calls: int
    orphan_results: int


def restore_window(value: Any, messages: Sequence[BaseMessage], *, quiet: bool = False) -> Window:
    """The stored window if it still matches ``messages``, else the start of the history (logged unless ``quiet``)."""
    if not isinstance(value, Mapping):
        return Window()
    start, mask_until = value.get("start"), value.get("mask_until", 0)
    if not isinstance(start, int) or not isinstance(mask_until, int) or not 0 <= start <= len(messages):
        if not quiet:
            log.warning("Stored context window %r does not match the history; starting from its beginning", value)
        return Window()
    if start and (
        start == len(messages)
        or not isinstance(messages[start], HumanMessage)
        or messages[start].id != value.get("start_id")
    ):
        if not quiet:
            log.warning("Stored context window no longer matches the history; starting from its beginning")
        return Window()
    planned, planned_id = value.get("planned", 0), value.get("planned_id")
    if not (isinstance(planned, int) and start < planned < len(messages) and isinstance(messages[planned], HumanMessage)
            and messages[planned].id == planned_id):
        planned, planned_id = 0, None  # none, or the history changed: planned again when due
    return Window(start, value.get("start_id"), max(0, min(mask_until, len(messages))), planned, planned_id)


def _calls_by_id(messages: Sequence[BaseMessage]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[str(call.get("id") or "")] = (str(call.get("name") or ""), call.get("args") or {})
    return calls


def mask_stub(tool: str, args: Mapping[str, Any], tokens: int) -> str:
    """The one line that stands in for an old tool output: tool, device, size, how to get it again."""
    target = next((str(args[k]) for k in _TARGET_KEYS if isinstance(args.get(k), (str, int))), "")
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    if len(shown) > _MAX_STUB_ARGS_CHARS:
        shown = shown[: _MAX_STUB_ARGS_CHARS - 3] + "..."
    return MASK_STUB.format(
        tool=tool or "the tool",
        target=f" for {target}" if target else "",
        tokens=tokens,
        args=f" with {shown}" if shown else "",
    )


def cap_output(message: ToolMessage, cap: int, counter: TokenCounter) -> ToolMessage:
    """``message`` with its text cut head-and-tail to about ``cap`` tokens (itself when it fits), a
    JSON output inside its structure (still JSON, see ``cutting.py``).

    A pure function of the output and the cap, memoised: a capped output is the
    same text in every request, so it does not break the cached prefix either.
    """
    if counter.message(message) <= cap or not isinstance(message.content, str):
        return message
    content = message.content

    def capped() -> ToolMessage:
        # Kept in the counter's bounded cache (the key and the cut text are what it keeps alive).
        text = counter.remembered(("capped", cap, content), lambda: truncate_output(content, cap, counter, marker=CAP_MARKER))
        return message.model_copy(update={"content": text})

    copy: ToolMessage = counter.derived(message, ("capped", cap), capped)
    return copy


def masked_view(
    messages: Sequence[BaseMessage], start: int, mask_until: int, counter: TokenCounter, end: int | None = None,
    output_cap: int | None = None,
) -> tuple[list[BaseMessage], int, int]:
    """``messages[start:end]`` with tool outputs before ``mask_until`` replaced by stubs
    and the others cut to ``output_cap`` tokens (None: not cut), or, when identical to an
    earlier output of their turn, replaced by a one-line note.

    Returns the view, how many outputs were masked and the tokens that saved.
    Stubs are a pure function of the output and its call, so a masked message
    is the same text in every request: it does not break the cached prefix.
    """
    view = list(messages[start:end])
    first = max(0, mask_until - start)
    repeated = _repeated_outputs(view)
    for i in range(first, len(view)):
        message = view[i]
        if i in repeated:
            note = REPEAT_STUB.format(tool=message.name or "the tool")
            view[i] = counter.derived(message, "repeated", functools.partial(_with_content, message, note))
        elif output_cap is not None and isinstance(message, ToolMessage):
            view[i] = cap_output(message, output_cap, counter)
    if mask_until <= start:
        return view, 0, 0
    calls = _calls_by_id(messages[start : mask_until if end is None else min(mask_until, end)])
    masked = saved = 0
    for i in range(min(mask_until - start, len(view))):
        message = view[i]
        if not isinstance(message, ToolMessage):
            continue
        name, args = calls.get(str(message.tool_call_id), (message.name or "", {}))
        # Both counts are memoised by content: masking costs look-ups on every later call.
        tokens = counter.message(message)
        stub = mask_stub(name, args, tokens)
        copy = counter.derived(message, ("masked", stub), functools.partial(_with_content, message, stub))
        stub_tokens = counter.message(copy)
        if stub_tokens >= tokens:
            continue  # a short output costs less than its stub
        saved += tokens - stub_tokens
        masked += 1
        view[i] = copy
    return view, masked, saved


def _with_content(message: BaseMessage, text: str) -> BaseMessage:
    return message.model_copy(update={"content": text})


def _repeated_outputs(view: Sequence[BaseMessage]) -> set[int]:
    """Indexes of tool outputs identical to an earlier output of the same turn (and longer than a stub).

    A small model often makes the same call two or three times in a turn: sending the same
    output again only fills the window. A pure function of the turn, like the masking.
    """
    repeated: set[int] = set()
    seen: set[tuple[str, str]] = set()
    for i, message in enumerate(view):
        if isinstance(message, HumanMessage):
            seen.clear()
        elif isinstance(message, ToolMessage) and isinstance(message.content, str) and len(message.content) > _REPEAT_MIN_CHARS:
            key = (message.name or "", message.content)
            if key in seen:
                repeated.add(i)
            seen.add(key)
    return repeated


def _turn_starts(messages: Sequence[BaseMessage], start: int) -> list[int]:
    """Indexes (from ``start``) where a turn starts: every user message."""
    return [i for i in range(start, len(messages)) if isinstance(messages[i], HumanMessage)]


def turn_tokens(
    messages: Sequence[BaseMessage], start: int, end: int, mask_until: int, counter: TokenCounter,
    output_cap: int | None,
) -> int:
    """Tokens of ``messages[start:end]`` (one turn) as :func:`masked_view` sends them.

    A turn wholly before the mask boundary, or wholly after it, is sent as a pure function of
    its own messages (its calls, its repeated outputs, the cap): its count is kept with its
    first message, checked against the same objects, so that planning a cut (which costs turns
    newest first, at every call while a cut is being planned) costs look-ups, not every turn's
    view built again (~5 ms a call at 500 turns).
    """
    if start >= end:
        return 0
    side = "masked" if end <= mask_until else "sent" if start >= mask_until else None
    if side is None:  # the turn the boundary falls in
        view, _, _ = masked_view(messages, start, mask_until, counter, end, output_cap)
        return sum(counter.message(m) for m in view)
    slot: list[Any] = counter.derived(messages[start], ("turn-tokens", end - start, side, output_cap), lambda: [None])
    kept = slot[0]
    # The same objects (a dead reference gives None, which is none of them), compared at C speed.
    if kept is not None and all(map(operator.is_, map(operator.call, kept[0]), messages[start:end])):
        return int(kept[1])
    view, _, _ = masked_view(messages, start, mask_until, counter, end, output_cap)
    tokens = sum(counter.message(m) for m in view)
    slot[0] = (_refs(messages[start:end]), tokens)
    return tokens


def oldest_fitting_turn(
    messages: Sequence[BaseMessage], bounds: Sequence[int], mask_until: int, room: int, counter: TokenCounter,
    output_cap: int | None, sums: _MaskedSums,
) -> int:
    """Where the window starts for the newest turns to fit ``room``, masked from ``mask_until``: the
    end of the newest turn that, added to all newer ones, goes over (-1: all of them fit).

    Turn ``k`` spans ``bounds[k]`` to ``bounds[k + 1]``. The turns past the boundary are costed one
    by one, newest first; the turns wholly before it come from ``sums`` (asked for those it lacks),
    the first over found by bisection: the same answer as costing them one by one.
    """
    total = 0
    k = len(bounds) - 2
    while k >= 0 and bounds[k + 1] > mask_until:  # the turns not wholly masked (a few), newest first
        total += turn_tokens(messages, bounds[k], bounds[k + 1], mask_until, counter, output_cap)
        if total > room:
            return bounds[k + 1] if k + 1 < len(bounds) - 1 else bounds[-2]
        k -= 1
    if k < 0:
        return -1
    j = sums.oldest_over(k, room - total, lambda t: turn_tokens(messages, bounds[t], bounds[t + 1], mask_until, counter,
                                                                   output_cap))
    if j < 0:
        return -1
    return bounds[j + 1] if j + 1 < len(bounds) - 1 else bounds[-2]


def plan_window(
    messages: Sequence[BaseMessage],
    previous: Window,
    available: int,
    low_water: int,
    counter: TokenCounter,
    *,
    tool_output_turns: int | None = DEFAULT_TOOL_OUTPUT_TURNS,
    output_cap: int | None = None,
    ready: int = 0,
    cut_margin: int = 0,
) -> WindowPlan:
    """Keep ``previous`` while the history from it fits ``available``; else cut down to ``low_water``.

    ``available`` and ``low_water`` are token rooms for the history alone (the
    system message and the reply priming already taken out). ``tool_output_turns``
    is how many of the latest turns keep their tool outputs when the window moves
    (None: never mask; only the current one when more would leave no earlier turn);
    ``output_cap`` the most tokens one tool output may take in the request (None: no cap). ``ready``: a summary covers the history up to there,
    so a cut starts there when what follows fits. ``cut_margin``: what an item cut to fit
    leaves unused (:func:`.history.fit_history`). Turns are costed newest first and only
    until the room is exceeded, so the dropped part of a long history is never encoded.
    """
    window = previous
    starts = _turn_starts(messages, window.start)
    # Turn k spans bounds[k]..bounds[k+1]; a head without a user message joins the first turn.
    bounds = [window.start, *starts[1:], len(messages)] if starts else [window.start, len(messages)]

    # The counts of the turns wholly before the mask boundary, summed oldest first (see _MaskedSums).
    sums = _MaskedSums()

    def newest_turns(mask_until: int, room: int) -> int:
        return oldest_fitting_turn(messages, bounds, mask_until, room, counter, output_cap, sums)

    def mask_boundary() -> int:
        if tool_output_turns is not None and len(starts) > max(1, tool_output_turns):
            return max(window.mask_until, starts[-max(1, tool_output_turns)])
        return window.mask_until

    def capped(message: BaseMessage) -> BaseMessage:
        return cap_output(message, output_cap, counter) if output_cap is not None and isinstance(message, ToolMessage) else message

    def view_and_fit(start: int, mask_until: int) -> tuple[list[BaseMessage], int, int, int, Any, FitResult]:
        # Outputs are capped as the fit reaches them (newest first): those it drops are never counted.
        view, masked, saved = masked_view(messages, start, mask_until, counter)
        units, stats = repair(view)
        fit = fit_history(units, available, counter, prepare=capped, cut_margin=cut_margin)
        sent = [fit.prepared.get(id(m), m) for m in view]
        return sent, masked, saved, sum(len(u) for u in units), stats, fit

    # A fit that kept everything is the same at any room it still fits in: the room (which the
    # calibration moves at every call) and the cut margin (nothing was cut) are not in the key.
    memo_key = (window.start, window.mask_until, output_cap)
    extended = _extend_previous(messages, window, memo_key, available, counter, capped)
    if extended is not None:  # the history from the start is the same objects: so are its masked turns
        previous_fit = _fit_memo(messages[window.start], counter)[0]
        if previous_fit is not None and previous_fit.masked_sums is not None:
            sums = previous_fit.masked_sums.copy()
    view, masked, saved, repaired, stats, fit = extended or view_and_fit(window.start, window.mask_until)
    # Everything from the stored start was sent as it is: the window stays (the common case, one pass).
    moved = bool(fit.truncated) or fit.over_budget or len(fit.messages) != repaired
    planned = False
    if moved:
        sums = _MaskedSums()  # costed at masks of their own here: none kept
        mask_until = mask_boundary()
        new_start = -1
        if window.start < ready < len(messages) and ready in starts:
            # A summary up to ``ready`` has landed: start there if what follows fits.
            _, _, _, count, _, fits = view_and_fit(ready, max(mask_until, ready))
            if not (fits.truncated or fits.over_budget) and len(fits.messages) == count:
                new_start = ready
        if new_start == -1:
            new_start = newest_turns(mask_until, low_water)
            if tool_output_turns is not None and starts and new_start == starts[-1] > window.start:
                # Only the current turn would be left (a small window, or a turn of many outputs):
                # keep the earlier turns that fit the whole room, their tool outputs masked.
                deeper = newest_turns(starts[-1], available)
                if deeper == -1 or deeper < new_start:
                    mask_until, new_start = starts[-1], deeper
            new_start = window.start if new_start == -1 else max(new_start, window.start)
        start_id = messages[new_start].id if new_start < len(messages) else None
        window = Window(new_start, start_id, max(mask_until, new_start))
        view, masked, saved, repaired, stats, fit = view_and_fit(window.start, window.mask_until)
    elif not window.planned and fit.tokens > low_water + PLAN_AHEAD * (available - low_water):
        # Plan the next cut so that, once the budget is full, what follows it is about the
        # low-water mark: the room left now is roughly what will still be added.
        target = newest_turns(mask_boundary(), max(0, low_water - (available - fit.tokens)))
        if window.start < target < len(messages):  # -1: with the masking due, nothing need go yet
            window = replace(window, planned=target, planned_id=messages[target].id)
            planned = True
    if window.start < len(messages) and not (fit.truncated or fit.over_budget) and len(fit.messages) == repaired:
        # Everything from the start was sent: the next call extends this fit with what it adds.
        key = (window.start, window.mask_until, output_cap)
        slot = _fit_memo(messages[window.start], counter)
        kept = slot[0] if extended is not None and not moved else None
        if kept is None or kept.key != key:  # a fit made anew: references to all of it
            originals, view_refs, fitted_refs = _refs(messages[window.start:]), _refs(view), _refs(fit.messages)
        else:  # the previous fit extended: its references, and new ones for what was added
            originals = kept.originals + _refs(messages[kept.end:])
            view_refs, fitted_refs = kept.view + _refs(view[len(kept.view):]), kept.fitted + _refs(fit.messages[len(kept.fitted):])
        slot[0] = _FitMemo(key, len(messages), originals, view_refs, fitted_refs, fit.tokens, repaired, stats, masked,
                           saved, None if moved else sums)
    return WindowPlan(window, fit, view, moved, planned, masked, saved, stats.interrupted_calls, stats.orphan_results)


@dataclass(frozen=True)
class _FitMemo:
    """A call's fit of the whole history from its window's start, kept with that first message.

    Weak references only: the counter keeps no message alive (this memo lives as long as the
    first message does, so a strong one would keep the whole conversation for ever).
    """

    key: tuple[Any, ...]  # window start, mask boundary, output cap
    end: int  # len(messages) then
    originals: list[weakref.ref[BaseMessage]]  # messages[start:end] then (the same objects must be there now)
    view: list[weakref.ref[BaseMessage]]
    fitted: list[weakref.ref[BaseMessage]]
    tokens: int
    repaired: int
    stats: RepairStats
    masked: int
    saved: int
    masked_sums: _MaskedSums | None = None  # of the same history (start to end)


class _MaskedSums:
    """Token counts of a history's turns wholly before a mask boundary, summed from an anchor turn:
    ``forward[i]`` is what turns ``anchor`` to ``anchor + i - 1`` take, masked, ``back[i]`` what turns
    ``anchor - 1`` down to ``anchor - i`` take. Each grows by appending: forward as the boundary
    moves on, back only as far as a search needs (the turns a cut drops are never costed).

    Such a turn is sent as a pure function of its own messages, whatever the boundary past it:
    while the history from the start stays the same objects (a fit extended), the sums stay true,
    and planning the next cut, at every call while one is due, costs the turns the boundary passed
    since and a bisection, not a look-up of every turn (~450 at 500 turns).
    """

    def __init__(self) -> None:
        self.anchor: int | None = None
        self.forward: list[int] = [0]
        self.back: list[int] = [0]

    def copy(self) -> _MaskedSums:
        kept = _MaskedSums()
        kept.anchor, kept.forward, kept.back = self.anchor, list(self.forward), list(self.back)
        return kept

    def oldest_over(self, k: int, room: int, count: Callable[[int], int]) -> int:
        """The turn whose count, added to those of turns ``k`` down to it (newest first), goes over
        ``room`` (-1: turns ``k`` to 0 fit); ``count(t)`` is asked for the turns not summed yet."""
        if self.anchor is None or k + 1 < self.anchor:  # first use, or a boundary before the anchor: anew
            self.anchor, self.forward, self.back = k + 1, [0], [0]
        anchor, forward, back = self.anchor, self.forward, self.back
        for turn in range(anchor + len(forward) - 1, k + 1):
            forward.append(forward[-1] + count(turn))
        newer = forward[k - anchor + 1]  # turns anchor to k
        over = newer - room  # among those, adding turn j goes over once forward[j - anchor] < over
        if over > 0:
            return anchor + bisect.bisect_left(forward, over, 0, k - anchor + 1) - 1
        need = room - newer  # then turns anchor - 1, ... go over once back[i] > need
        if back[-1] > need:
            return anchor - bisect.bisect_right(back, need)
        while len(back) <= anchor:
            turn = anchor - len(back)
            back.append(back[-1] + count(turn))
            if back[-1] > need:
                return turn
        return -1


def _refs(messages: Sequence[BaseMessage]) -> list[weakref.ref[BaseMessage]]:
    return list(map(weakref.ref, messages))  # at C speed, as _alive: a steady call makes ~3 a message


def _alive(refs: list[weakref.ref[BaseMessage]]) -> list[BaseMessage] | None:
    """The objects, or None when one of them is gone (a repair's synthetic result, say)."""
    objects = list(map(operator.call, refs))
    return None if any(map(operator.is_, objects, repeat(None))) else objects  # type: ignore[return-value]


def _fit_memo(first: BaseMessage, counter: TokenCounter) -> list[_FitMemo | None]:
    slot: list[_FitMemo | None] = counter.derived(first, "window-fit", lambda: [None])
    return slot


def _extend_previous(
    messages: Sequence[BaseMessage], window: Window, key: tuple[Any, ...], available: int, counter: TokenCounter,
    capped: Callable[[BaseMessage], BaseMessage],
) -> tuple[list[BaseMessage], int, int, int, RepairStats, FitResult] | None:
    """The previous call's fit extended by the messages added since, when that is what a whole
    fit would give: the same window, the same message objects before, a clean boundary (the
    last message then was a question or tool results) and everything still fitting. None: fit anew.

    What a steady call costs is then what is new, not the history sent (1,200 messages at 500 turns).
    """
    start = window.start
    memo = _fit_memo(messages[start], counter)[0] if start < len(messages) else None
    if memo is None or memo.key != key or not start < memo.end <= len(messages) or window.mask_until > memo.end:
        return None
    end = memo.end
    originals, before, fitted = _alive(memo.originals), _alive(memo.view), _alive(memo.fitted)
    if originals is None or before is None or fitted is None:
        return None
    if not all(map(operator.is_, originals, messages[start:end])):
        return None
    if end == len(messages):
        if memo.tokens > available:
            return None
        return before, memo.masked, memo.saved, memo.repaired, memo.stats, FitResult(fitted, memo.tokens, [], False)
    last, first_new = messages[end - 1], messages[end]
    if isinstance(first_new, ToolMessage) or (isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls)):
        return None
    # The current turn's view (an output repeating one of its turn is a note, whichever call it came in).
    turn = next((i for i in range(end - 1, start - 1, -1) if isinstance(messages[i], HumanMessage)), start)
    tail_view = masked_view(messages, turn, window.mask_until, counter)[0][end - turn:]
    units, stats = repair(tail_view)
    added = [capped(m) for unit in units for m in unit]
    tokens = memo.tokens + sum(counter.message(m) for m in added)
    if tokens > available:
        return None  # the room is exceeded: the whole fit decides what goes
    in_view = {id(m) for m in tail_view}
    prepared = {id(o): p for o, p in zip((m for unit in units for m in unit), added, strict=True) if id(o) in in_view}
    view = before + [prepared.get(id(m), m) for m in tail_view]
    fit = FitResult(fitted + added, tokens, [], over_budget=False)
    totals = RepairStats(memo.stats.interrupted_calls + stats.interrupted_calls, memo.stats.orphan_results + stats.orphan_results)
    return view, memo.masked, memo.saved, memo.repaired + len(added), totals, fit
