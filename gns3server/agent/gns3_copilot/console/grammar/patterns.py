"""The policy file's command patterns: words with abbreviations, globs and wildcards.

A pattern is matched word by word against the start of a canonical command (the
words a grammar module produced), case-insensitively unless asked otherwise
(Linux options are case-sensitive: ``ethtool -t`` runs a self-test, ``-T`` shows):

``wr[ite]``   ``write`` or any abbreviation of it down to ``wr``
``reload``    exactly that word
``mkfs*``     a glob: ``*`` any characters, ``?`` one character (``*/*``: a word with a slash)
``{a|b}``     one of several word patterns
``w...``      zero or more words, each matching the word pattern ``w`` (``{-*}...``: options)
``*``         any one word
``...``       any number of words (also none)
``$``         the end of the command; ``w$`` is ``w`` then the end
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_ANY_ONE, _ANY_MANY, _END = "*", "...", "$"


class PatternError(ValueError):
    """A pattern that cannot be compiled."""


@dataclass(frozen=True)
class Word:
    """One word of a pattern: a few alternatives, each a regex over the whole word."""

    text: str
    choices: tuple[re.Pattern[str], ...]  # case-sensitive; with re.IGNORECASE in folded
    folded: tuple[re.Pattern[str], ...]

    def matches(self, word: str, fold: bool = True) -> bool:
        return any(choice.fullmatch(word) for choice in (self.folded if fold else self.choices))


@dataclass(frozen=True)
class Repeat:
    """``w...``: zero or more words matching ``word``."""

    word: Word


Token = Word | Repeat | str


def _alternative(alt: str, text: str) -> str:
    """The regular expression for one alternative of a word pattern."""
    if not alt:
        raise PatternError(f"bad word pattern {text!r}")
    if "[" in alt or "]" in alt:
        if not alt.endswith("]") or alt.count("[") != 1 or alt.count("]") != 1 or alt.startswith("["):
            raise PatternError(f"bad word pattern {text!r}")
        head, tail = alt[:-1].split("[")
        # head, then each further letter of tail only after the ones before it: a prefix of head+tail.
        optional = "".join(f"(?:{re.escape(ch)}" for ch in tail) + ")?" * len(tail)
        return re.escape(head) + optional
    if "*" in alt or "?" in alt:
        return "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in alt)
    return re.escape(alt)


def parse_word(text: str) -> Word:
    """Compile one word pattern (``wr[ite]``, ``mkfs*``, ``{a|b[c]}``)."""
    braced = text.startswith("{") and text.endswith("}")
    inner = text[1:-1] if braced else text
    if not inner or "{" in inner or "}" in inner:
        raise PatternError(f"bad word pattern {text!r}")
    regexes = [_alternative(alt, text) for alt in (inner.split("|") if braced else [inner])]
    return Word(text, tuple(re.compile(r, re.DOTALL) for r in regexes), tuple(re.compile(r, re.DOTALL | re.IGNORECASE) for r in regexes))


def _tokens(part: str) -> list[Token]:
    if part in (_ANY_ONE, _ANY_MANY, _END):
        return [part]
    if part.endswith(_END):  # "w$" and "*$": the word (or wildcard), then the end
        return [*_tokens(part[:-1]), _END]
    if part.endswith(_ANY_MANY):
        return [Repeat(parse_word(part[: -len(_ANY_MANY)]))]
    return [parse_word(part)]


@dataclass(frozen=True)
class Pattern:
    """A compiled command pattern."""

    text: str
    tokens: tuple[Token, ...]

    @classmethod
    def parse(cls, text: object) -> Pattern:
        if not isinstance(text, str) or not text.strip():
            raise PatternError(f"empty command pattern {text!r}")
        return cls(text, tuple(token for part in text.split() for token in _tokens(part)))

    def matches(self, words: Sequence[str], fold: bool = True) -> bool:
        """Whether the pattern matches the start of ``words``.

        Dynamic programming from the last token back, one row of word positions per
        token: linear in tokens times words, without recursion. Backtracking over
        ``...`` grows with the power of their number, and a 1,000-character line
        was judged in half a second on the event loop.
        """
        words = tuple(words)
        tokens, n = self.tokens, len(words)
        first = tokens[0] if tokens else None
        if isinstance(first, Word) and not (n and first.matches(words[0], fold)):
            return False  # most patterns end here: another command
        after = [True] * (n + 1)  # past the last token: whatever is left matches
        for head in reversed(tokens):
            row = [False] * (n + 1)
            for w in range(n, -1, -1):
                if head == _END:
                    row[w] = w == n
                elif head == _ANY_MANY:
                    row[w] = after[w] or (w < n and row[w + 1])
                elif isinstance(head, Repeat):
                    row[w] = after[w] or (w < n and row[w + 1] and head.word.matches(words[w], fold))
                elif w < n and after[w + 1]:
                    row[w] = head == _ANY_ONE or (isinstance(head, Word) and head.matches(words[w], fold))
            after = row
        return after[0]
