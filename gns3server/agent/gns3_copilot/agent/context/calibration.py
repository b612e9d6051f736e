"""Room for the answer, and a token-scale calibration that is smooth and never overfills.

Problems seen with small local models:

- With no ``max_tokens`` a server may generate until its window is full, so a
  prompt that fitted still overflows. :func:`answer_tokens` is the output reserve
  (the config's ``max_tokens``, else :func:`default_max_tokens` scaled to the
  window); the model factory sends it and :func:`capped_budget` keeps the prompt
  below the window minus it. A ``max_tokens`` that would leave the prompt less than
  :data:`MIN_PROMPT_TOKENS` of the window is refused (:func:`max_tokens_problem`).
- The correction factor (provider tokens per token we estimate) came from the
  previous call alone and swung 0.75-1.5; below 1 it grew the budget up to the
  whole window. :func:`smoothed_scale` averages observations geometrically with a
  weight that starts at 1 and settles at :data:`SMOOTHING_WEIGHT`, and
  :func:`capped_budget` never lets any factor push past the window minus the reserve.
- A factor learnt on earlier requests is wrong for a request whose content differs
  (SmolLM2's tokenizer, with llama-cpp-python's escaping, spends three times our count
  on JSON and about ours on English). Where the server's tokenizer counts the
  request's own text, :func:`content_scale` makes the factor from that count plus the
  chat template's framing per message (learnt from usage, :func:`observed_framing`).

All of the calibration is here: the factor's bounds (:func:`clamp_token_scale`), a
request's estimate in the provider's tokens (:func:`server_tokens_estimate`), and
:class:`Calibrator`, what one run knows (the factor, the framing, how many calls
taught them) with the decisions the graph makes around each model call: fit the
factor to a request's content, prepare it again or not, tighten it after a
context-length refusal, learn from the usage the provider reported.

Pure, no I/O: the graph feeds it what the provider reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "TOKEN_SCALE_BOUNDS",
    "Calibrator",
    "clamp_token_scale",
    "server_tokens_estimate",
    "MIN_DEFAULT_MAX_TOKENS",
    "MAX_DEFAULT_MAX_TOKENS",
    "MIN_PROMPT_TOKENS",
    "SMOOTHING_WEIGHT",
    "answer_tokens",
    "capped_budget",
    "DEFAULT_FRAMING",
    "content_scale",
    "observed_framing",
    "smoothed_mean",
    "default_max_tokens",
    "max_tokens_problem",
    "observed_scale",
    "smoothed_scale",
]

# Default reply size: an eighth of the window, at least 256 tokens (a short answer or a
# tool call at 2K), at most 4096 (a long answer; more is a config decision).
MIN_DEFAULT_MAX_TOKENS = 256
MAX_DEFAULT_MAX_TOKENS = 4096
DEFAULT_ANSWER_SHARE = 8
# Weight of a new observation once a few have been seen (the first ones count more).
SMOOTHING_WEIGHT = 0.3
# The least room a configured max_tokens must leave in the window for the prompt: the short
# system prompt and the essential tools (about 380 tokens, docs/llm-config.md) and a short
# question. The default reply reserve leaves more at every window (744 at 1K).
MIN_PROMPT_TOKENS = 512
# Tokens a chat template adds around each message before any usage says: what our own count
# adds (counting.TOKENS_PER_MESSAGE and the role); at most MAX_FRAMING are believed.
DEFAULT_FRAMING = 4.0
MAX_FRAMING = 32.0
# How far a provider's reported token counts may correct our estimate. Up to 4: a server
# that HTML-escapes message text counts a JSON tool result at three times our count.
TOKEN_SCALE_BOUNDS = (0.75, 4.0)
# On a provider's context-length rejection the factor is multiplied by this (from at least 1), once.
CONTEXT_RETRY_TIGHTENING = 1.5
# A request is prepared again with the factor fitted to its content when that moves it by
# more than this, at most MAX_REFITS times.
REFIT_TOLERANCE = 0.03
MAX_REFITS = 2


def clamp_token_scale(scale: Any) -> float:
    """A usable correction factor: 1.0 when unknown, else within the bounds."""
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or math.isnan(scale) or scale <= 0:
        return 1.0
    low, high = TOKEN_SCALE_BOUNDS
    return min(high, max(low, float(scale)))


def server_tokens_estimate(messages_tokens: int, tools_tokens: int, tools_server_tokens: int | None, scale: float) -> int:
    """A request in the provider's tokens: the messages scaled, the definitions (if sent) as
    measured when known, else scaled with the rest."""
    tools_estimate = tools_server_tokens if tools_server_tokens is not None else scale * tools_tokens
    return round(scale * messages_tokens + (tools_estimate if tools_tokens else 0))


def default_max_tokens(limit_tokens: int) -> int:
    """The reply reserve for a window of ``limit_tokens`` when the config sets none."""
    return max(MIN_DEFAULT_MAX_TOKENS, min(MAX_DEFAULT_MAX_TOKENS, limit_tokens // DEFAULT_ANSWER_SHARE))


def answer_tokens(llm_config: Mapping[str, Any]) -> int:
    """Tokens reserved for the reply: the config's ``max_tokens`` or the window-scaled default.

    ``context_limit`` must already be valid (thousands of tokens, an int > 0).
    """
    configured = llm_config.get("max_tokens")
    if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0:
        return configured
    return default_max_tokens(int(llm_config["context_limit"]) * 1000)


def max_tokens_problem(context_limit: Any, max_tokens: Any) -> str | None:
    """Why ``max_tokens`` leaves the prompt too little of the window, or None when it does not.

    Only a valid pair is judged (``context_limit`` and ``max_tokens`` ints > 0): the
    schema reports the rest. The prompt must keep :data:`MIN_PROMPT_TOKENS` of the
    ``context_limit * 1000`` tokens.
    """
    for value in (context_limit, max_tokens):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return None
    if max_tokens <= context_limit * 1000 - MIN_PROMPT_TOKENS:
        return None
    return (
        f"must leave at least {MIN_PROMPT_TOKENS} tokens of the context window for the prompt: "
        f"at most context_limit * 1000 - {MIN_PROMPT_TOKENS}"
    )


def capped_budget(budget: int, scale: float, limit_tokens: int, reserve: int) -> int:
    """The input budget in our token units, corrected by ``scale`` and capped.

    ``budget / scale`` when the provider counts ``scale`` tokens per token of ours;
    never more than ``limit_tokens - reserve`` of the provider's tokens, nor of ours,
    whatever ``scale`` says (a factor below 1 learnt on one request must not fill the
    window on the next; one above 1 makes each of our tokens cost more of it).
    """
    ceiling = limit_tokens - reserve
    return max(0, min(int(budget / scale), int(ceiling / max(scale, 1.0))))


def observed_scale(reported_prompt_tokens: Any, estimated_tokens: Any) -> float | None:
    """Provider tokens per estimated token for one request, or None when either is unusable."""
    for value in (reported_prompt_tokens, estimated_tokens):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return None
    return reported_prompt_tokens / estimated_tokens


def smoothed_scale(previous: float | None, samples: int, observed: float) -> float:
    """Fold one observation into the running factor (a geometric moving average).

    The n-th observation weighs ``max(1/n, SMOOTHING_WEIGHT)``: the first replaces
    the unknown default, the next few average evenly, later ones move it slowly.
    Geometric, so 0.5 and 2.0 average to 1.0.
    """
    if previous is None or samples <= 0 or previous <= 0:
        return observed
    weight = max(1.0 / (samples + 1), SMOOTHING_WEIGHT)
    return math.exp((1 - weight) * math.log(previous) + weight * math.log(observed))



def content_scale(server_text: int, messages: int, framing: float, our_tokens: int) -> float | None:
    """The factor for a request whose text the server counts ``server_text`` tokens.

    The template adds ``framing`` tokens per message around the text (its role tags);
    ``our_tokens`` is our estimate of the same messages. Additive, not a ratio: the
    framing does not grow with a message's length.
    """
    if our_tokens <= 0 or server_text < 0:
        return None
    return (server_text + framing * messages) / our_tokens


def observed_framing(real_tokens: int, server_text: int, messages: int) -> float | None:
    """Tokens per message a template added around the text, from a reported prompt count."""
    if messages <= 0:
        return None
    return min(MAX_FRAMING, max(0.0, (real_tokens - server_text) / messages))


def smoothed_mean(previous: float | None, samples: int, observed: float) -> float:
    """:func:`smoothed_scale`'s weights, arithmetic (for a count that may be near 0)."""
    if previous is None or samples <= 0:
        return observed
    weight = max(1.0 / (samples + 1), SMOOTHING_WEIGHT)
    return (1 - weight) * previous + weight * observed


@dataclass(frozen=True)
class Calibrator:
    """What one run knows of the provider's token counts, and what it decides from them.

    ``scale``: provider tokens per token we estimate (learnt from ``samples`` calls);
    ``framing``: tokens the server's chat template adds per message around the text
    where its tokenizer counts the text (learnt from ``framing_samples`` calls; None:
    :data:`DEFAULT_FRAMING`). ``with_tool_text``: the tool definitions' text is counted
    with the messages' (their cost on the server is unknown). Immutable: learning
    returns a new one, whose :meth:`as_state` the graph stores.
    """

    scale: float = 1.0
    samples: int = 0
    framing: float | None = None
    framing_samples: int = 0
    with_tool_text: bool = False

    @classmethod
    def from_state(cls, state: Mapping[str, Any], *, with_tool_text: bool = False) -> Calibrator:
        return cls(
            clamp_token_scale(state.get("token_scale")), int(state.get("token_scale_samples") or 0),
            state.get("token_framing"), int(state.get("token_framing_samples") or 0), with_tool_text,
        )

    def as_state(self) -> dict[str, Any]:
        return {"token_scale": self.scale, "token_scale_samples": self.samples,
                "token_framing": self.framing, "token_framing_samples": self.framing_samples}

    def content_fit(self, report: Mapping[str, Any], counted: int, messages: int) -> float:
        """The factor of a prepared request whose text the server counts ``counted`` tokens."""
        ours = report["total_tokens"] - (0 if self.with_tool_text else report["tools_tokens"])
        fitted = content_scale(counted, messages, DEFAULT_FRAMING if self.framing is None else self.framing, ours)
        return clamp_token_scale(fitted)

    @staticmethod
    def refits(scale: float, fitted: float, refits: int) -> bool:
        """Whether a request prepared at ``scale`` is prepared again at ``fitted`` (after ``refits``).

        Once refitted, only upwards: the content kept at the new budget is denser than
        the one measured (the safe side; the other way could swing back).
        """
        if refits >= MAX_REFITS:
            return False
        return not (abs(fitted / scale - 1) <= REFIT_TOLERANCE or (refits and fitted < scale))

    def own_estimate(self, report: Mapping[str, Any], counted: int, messages: int) -> int:
        """The request's estimate in the server's tokens, at its own content's factor (what the
        budget kept may be less dense than the factor it was kept with)."""
        own = self.content_fit(report, counted, messages)
        return server_tokens_estimate(report["total_tokens"] - report["tools_tokens"], report["tools_tokens"],
                                      report["tools_server_tokens"], own)

    @staticmethod
    def tightened(scale: float) -> float:
        """The factor to retry with after the provider refused a request as too long."""
        return clamp_token_scale(max(scale, 1.0) * CONTEXT_RETRY_TIGHTENING)

    @staticmethod
    def reported_prompt_tokens(usage: Mapping[str, Any] | None, tool_calls: int) -> int | None:
        """The provider's prompt count of one answer, when it can be trusted."""
        if tool_calls > 1:
            return None  # llama-cpp-python adds up the prompt counts of one completion per call
        real = usage.get("input_tokens") if usage else None
        return real if isinstance(real, int) and not isinstance(real, bool) else None

    def learned(
        self, report: Mapping[str, Any], *, real: int | None, tools_sent: bool, counted: int | None, messages: int,
        scale: float,
    ) -> Calibrator:
        """What the run knows after a request prepared at ``scale`` that the provider counted ``real``.

        ``tools_sent``: the request carried the tool definitions. With their real cost
        known, the factor learns the messages alone; without usage, the request's own
        count (``counted``) is the best observation. A call that observes nothing keeps
        the factor the request was prepared with.
        """
        tools_real = report.get("tools_server_tokens")
        sent_tools = tools_real if isinstance(tools_real, int) and tools_sent and report["tools_tokens"] else 0
        if isinstance(tools_real, int) and isinstance(real, int):
            observed = observed_scale(real - sent_tools, report["total_tokens"] - report["tools_tokens"])
        else:
            estimated = report["total_tokens"] - (0 if tools_sent else report["tools_tokens"])
            observed = observed_scale(real, estimated)
        framing, framing_samples = self.framing, self.framing_samples
        if counted is not None:
            if observed is None:
                observed = self.content_fit(report, counted, messages)
            if isinstance(real, int) and (tools_sent or not self.with_tool_text):
                seen = observed_framing(real - sent_tools, counted, messages)
                if seen is not None:
                    framing = smoothed_mean(framing, framing_samples, seen)
                    framing_samples += 1
        samples = self.samples
        if observed is not None:
            scale = clamp_token_scale(smoothed_scale(self.scale if samples else None, samples, observed))
            samples += 1
        return replace(self, scale=scale, samples=samples, framing=framing, framing_samples=framing_samples)
