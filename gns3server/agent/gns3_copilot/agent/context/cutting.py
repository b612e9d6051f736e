"""Cutting a text head-and-tail to a token budget, with a visible marker where it was cut.

A tool's output is usually JSON (the tool gate serialises a result as the OpenAI
clients do). Cut as plain text, its head and tail no longer parse, and the
marker's raw newlines land inside a JSON string, where JSON forbids them: the
model is handed a broken document. :func:`truncate_output` cuts such an output
inside its structure instead, so that what the model reads is still JSON:

1. its longest strings (a device's output, a configuration) head-and-tail, all
   to one length, the marker escaped with them, each keeping at least
   :data:`MIN_KEPT_TOKENS` of its text;
2. when that is not enough, the middle entries of its largest array or object,
   replaced by one entry holding the marker (the entries kept are whole).

Only a budget too small for even that (about the marker alone) gets the plain cut.
Every cut is a pure function of the text and the budget, so a cut output is the
same text in every request (the cached prefix holds).
"""

from __future__ import annotations

import json
from typing import Any

from .counting import TokenCounter, json_text

TRUNCATION_MARKER = "\n[... {cut} tokens cut here by GNS3 Copilot to fit the context window ...]\n"
# The smallest piece of an item's text worth keeping when it has to be cut.
MIN_KEPT_TOKENS = 32
# Rounds of re-measuring a cut document: escaping makes a string's tokens in JSON differ a little
# from its own, so a cut is checked on the serialised text and tightened by what it is still over.
_ROUNDS = 8
# The key of the entry that stands for the entries cut from an object.
_CUT_KEY = "..."

Container = dict[str, Any] | list[Any]
Cuts = dict[int, tuple[Any, int]]
"""Per container (by id): the key or index of its marker entry, and the tokens it stands for."""


def truncate_text(
    text: str, max_tokens: int, counter: TokenCounter, original_tokens: int | None = None,
    marker: str = TRUNCATION_MARKER,
) -> str:
    """Keep the head and tail of ``text`` within ``max_tokens``, marking the cut.

    ``original_tokens`` is the size of what ``text`` stands for when that was more
    than its text (say, a message with an image): then the marker is always added.
    ``marker`` has a ``{cut}`` field for the tokens cut.
    """
    encoding = counter.encoding
    tokens = encoding.encode_ordinary(text)
    original = max(len(tokens), original_tokens or 0)
    if original <= max_tokens:
        return text
    keep = min(len(tokens), max(0, max_tokens - counter.text(marker.format(cut=original))))
    while True:
        head = (keep + 1) // 2
        tail = keep - head
        result = (
            encoding.decode_bytes(tokens[:head]).decode("utf-8", errors="ignore")
            + marker.format(cut=original - keep)
            + (encoding.decode_bytes(tokens[len(tokens) - tail :]).decode("utf-8", errors="ignore") if tail else "")
        )
        excess = counter.text(result) - max_tokens
        if excess <= 0 or keep == 0:
            return result
        keep = max(0, keep - excess)


def truncate_output(text: str, max_tokens: int, counter: TokenCounter, marker: str = TRUNCATION_MARKER) -> str:
    """A tool output cut to ``max_tokens`` like :func:`truncate_text`, inside its structure when it is JSON."""
    if counter.text(text) <= max_tokens:
        return text
    cut = cut_json(text, max_tokens, counter, marker)
    return cut if cut is not None else truncate_text(text, max_tokens, counter, marker=marker)


def cut_json(text: str, max_tokens: int, counter: TokenCounter, marker: str = TRUNCATION_MARKER) -> str | None:
    """``text``, a JSON object or array, cut to at most ``max_tokens`` and still JSON (see the module's
    docstring); None when it is not one, or when not even its cut structure fits."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, (dict, list)):
        return None
    result = json_text(doc)
    over = counter.text(result) - max_tokens
    if over <= 0:  # written with more spacing than the clients use: compact, it fits
        return result
    over = _cut_strings(doc, over, max_tokens, counter, marker)
    cuts: Cuts = {}
    for _ in range(_ROUNDS * 8):
        if over <= 0:
            return json_text(doc)
        if not _cut_entries(doc, over, counter, marker, cuts):
            return None
        over = counter.text(json_text(doc)) - max_tokens
    return None


def _strings(doc: Container) -> list[tuple[Container, Any, str]]:
    """Every string value in ``doc`` (not the keys), with where it is, in document order."""
    found: list[tuple[Container, Any, str]] = []
    stack: list[Container] = [doc]
    while stack:
        container = stack.pop()
        items = list(container.items()) if isinstance(container, dict) else list(enumerate(container))
        nested = []
        for key, value in items:
            if isinstance(value, str):
                found.append((container, key, value))
            elif isinstance(value, (dict, list)):
                nested.append(value)
        stack.extend(reversed(nested))
    return found


def _level(sizes: list[int], excess: int, floor: int) -> int:
    """The longest length (at least ``floor``) that strings cut to it save ``excess`` tokens; ``floor`` if none."""
    def saved(level: int) -> int:
        return sum(size - level for size in sizes if size > level)

    low, high = floor, max(sizes, default=floor)
    if saved(low) < excess:
        return floor
    while low < high:  # the largest level with saved(level) >= excess
        middle = (low + high + 1) // 2
        if saved(middle) >= excess:
            low = middle
        else:
            high = middle - 1
    return low


def _cut_strings(doc: Container, over: int, max_tokens: int, counter: TokenCounter, marker: str) -> int:
    """Cut ``doc``'s longest strings, in place, to the one length that brings it closest under
    ``max_tokens`` (never below :data:`MIN_KEPT_TOKENS` of text); returns by how much it is still over."""
    leaves = _strings(doc)
    sizes = [counter.text(value) for _, _, value in leaves]
    floor = counter.text(marker.format(cut=10**6)) + MIN_KEPT_TOKENS
    slack = max(1, max_tokens // 50)  # within 2% of the budget is close enough

    def cut_to(level: int) -> int:
        for (container, key, value), size in zip(leaves, sizes):
            container[key] = truncate_text(value, level, counter, marker=marker) if size > level else value
        return counter.text(json_text(doc)) - max_tokens

    excess = over
    level: int | None = None
    best: int | None = None
    for _ in range(_ROUNDS):
        previous, level = level, _level(sizes, excess, floor)
        if previous is not None and level >= previous and over > 0:  # still over: shorter, if only by a token
            level = max(floor, previous - max(1, over // max(1, sum(size > previous for size in sizes))))
        if level == previous:
            break
        over = cut_to(level)
        if over <= 0 and (best is None or level > best):
            best = level
        if -slack <= over <= 0 or (over > 0 and level == floor):
            return over
        excess += over  # under the budget: a longer level; over it: a shorter one
    return cut_to(best if best is not None else floor)


def _entries(container: Container) -> list[tuple[Any, Any]]:
    return list(container.items()) if isinstance(container, dict) else list(enumerate(container))


def _marker_at(container: Container, cuts: Cuts) -> Any:
    """The key (or index) of the entry standing for what was cut from ``container``, or None."""
    mark = cuts.get(id(container))
    return None if mark is None else mark[0]


def _cuttable(container: Container, cuts: Cuts) -> bool:
    """Whether ``container`` has an entry besides its marker."""
    return len(container) > (0 if _marker_at(container, cuts) is None else 1)


def _thickest(doc: Container, counter: TokenCounter, cuts: Cuts) -> Container | None:
    """The container to thin: from the top, down into a child that is most of its parent, so that
    a list of nodes is thinned rather than the object around it."""
    if not _cuttable(doc, cuts):
        return None
    container = doc
    while True:
        children = [v for _, v in _entries(container) if isinstance(v, (dict, list)) and _cuttable(v, cuts)]
        sizes = [counter.text(json_text(child)) for child in children]
        if not children or 2 * max(sizes) <= counter.text(json_text(container)):
            return container
        container = children[sizes.index(max(sizes))]


def _cut_entries(doc: Container, over: int, counter: TokenCounter, marker: str, cuts: Cuts) -> bool:
    """Replace middle entries of the thickest container by one marker entry saying how many tokens
    they were, saving about ``over`` tokens; False when nothing is left to cut.

    ``cuts`` remembers each container's marker and the tokens it stands for, so that cutting the
    same container again widens the gap around that one marker.
    """
    container = _thickest(doc, counter, cuts)
    if container is None:
        return False
    items = _entries(container)
    mark = _marker_at(container, cuts)
    sizes = [counter.text(json_text(v)) + 1 for _, v in items]  # with its separator
    if mark is None:
        first = last = len(items) // 2  # the entries removed are items[first:last]
        removed, needed = 0, over + counter.text(json_text(marker.strip().format(cut=10**6)))
    else:
        first = next(i for i, (k, _) in enumerate(items) if k == mark)
        last = first + 1
        removed, needed = cuts[id(container)][1], over
    # At most half of what it holds at a time: the next round may thin a sibling instead.
    needed = min(needed, sum(sizes) // 2)
    gained = 0
    while gained < needed and (first > 0 or last < len(items)):
        right = last < len(items) and (first == 0 or (last - first) % 2 == 0)
        index = last if right else first - 1
        gained += sizes[index]
        removed += sizes[index]
        last, first = (last + 1, first) if right else (last, first - 1)
    note = marker.strip().format(cut=removed)
    if isinstance(container, dict):
        key = mark if mark is not None else _CUT_KEY
        while mark is None and key in container:
            key += "."
        rebuilt = {**dict(items[:first]), key: note, **dict(items[last:])}
        container.clear()
        container.update(rebuilt)
        cuts[id(container)] = (key, removed)
    else:
        container[:] = [v for _, v in items[:first]] + [note] + [v for _, v in items[last:]]
        cuts[id(container)] = (first, removed)
    return True
