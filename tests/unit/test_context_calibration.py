"""Reply reserve and token-scale calibration."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from gns3server.agent.gns3_copilot.agent.context.calibration import (
    DEFAULT_FRAMING,
    MIN_PROMPT_TOKENS,
    SMOOTHING_WEIGHT,
    Calibrator,
    answer_tokens,
    capped_budget,
    content_scale,
    default_max_tokens,
    max_tokens_problem,
    observed_framing,
    observed_scale,
    smoothed_mean,
    smoothed_scale,
)
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook, resolve_budget


@pytest.mark.parametrize(("limit", "expected"), [(1000, 256), (2000, 256), (4000, 500), (8000, 1000), (32000, 4000), (128000, 4096)])
def test_default_reply_reserve_scales_with_the_window(limit, expected):
    assert default_max_tokens(limit) == expected


def test_configured_max_tokens_wins():
    assert answer_tokens({"context_limit": 2, "max_tokens": 100}) == 100
    assert answer_tokens({"context_limit": 2}) == 256


@given(
    budget=st.integers(1, 200_000),
    scale=st.floats(0.01, 10),
    limit=st.integers(1000, 200_000),
    data=st.data(),
)
def test_capped_budget_never_passes_the_window_minus_the_reply(budget, scale, limit, data):
    # Any reserve a valid config can have (validation refuses one that leaves less room).
    reserve = data.draw(st.integers(1, limit - MIN_PROMPT_TOKENS))
    capped = capped_budget(budget, scale, limit, reserve)
    room = limit - reserve
    assert 0 <= capped <= room  # in our tokens
    assert capped * max(scale, 1.0) <= room + 1e-6  # and in the provider's, however it counts
    assert capped <= int(budget / scale)


def test_a_factor_above_1_cannot_give_the_prompt_the_reply_room():
    # 4K window, 2,000 tokens kept for the reply; the server counts 1.5 of its tokens per one of ours.
    config = {"context_limit": 4, "max_tokens": 2000}
    hook = create_pre_model_hook("sys {{topology_info}}", lambda s: None, lambda: config, list)
    report = hook({"messages": [HumanMessage("hi")], "token_scale": 1.5})["context_report"]
    assert report["budget"] * 1.5 <= 4000 - 2000
    assert report["budget"] == int(2000 / 1.5)


def test_a_max_tokens_that_leaves_the_prompt_no_room_is_refused_before_any_request():
    with pytest.raises(ValueError, match=r"^Invalid max_tokens: 5000 \(must leave at least 512 tokens"):
        resolve_budget({"context_limit": 2, "max_tokens": 5000})
    with pytest.raises(ValueError, match="Invalid max_tokens"):
        create_pre_model_hook("sys", lambda s: None, lambda: {"context_limit": 2, "max_tokens": 1489}, list)(
            {"messages": [HumanMessage("hi")]}
        )
    assert resolve_budget({"context_limit": 2, "max_tokens": 2000 - MIN_PROMPT_TOKENS})["limit_tokens"] == 2000


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 8, 32, 128, 1000])
def test_the_default_reply_reserve_always_leaves_the_prompt_its_room(limit):
    assert default_max_tokens(limit * 1000) <= limit * 1000 - MIN_PROMPT_TOKENS
    assert max_tokens_problem(limit, default_max_tokens(limit * 1000)) is None


def test_observed_scale_rejects_unusable_numbers():
    assert observed_scale(150, 100) == 1.5
    for reported, estimated in [(None, 100), (0, 100), (100, 0), (True, 10), (1.5, 10)]:
        assert observed_scale(reported, estimated) is None


def test_smoothing_takes_the_first_observation_then_averages_geometrically():
    assert smoothed_scale(None, 0, 1.4) == 1.4
    assert smoothed_scale(2.0, 1, 0.5) == pytest.approx(1.0)  # weight 1/2, geometric
    late = smoothed_scale(1.0, 50, 2.0)
    assert late == pytest.approx(math.exp(SMOOTHING_WEIGHT * math.log(2.0)))


def test_smoothing_damps_the_swings_seen_with_a_local_server():
    # The factor alternated 0.75 / 1.5 from call to call; smoothed it stays near their geometric mean.
    scale = None
    for samples, observed in enumerate([0.75, 1.5] * 10):
        scale = smoothed_scale(scale, samples, observed)
    assert 0.9 < scale < 1.25


def test_a_small_factor_cannot_give_the_prompt_the_reply_room():
    hook = create_pre_model_hook("sys {{topology_info}}", lambda s: None, lambda: {"context_limit": 2}, list)
    report = hook({"messages": [HumanMessage("hi")], "token_scale": 0.75})["context_report"]
    assert report["answer_tokens"] == 256
    assert report["budget"] == min(int(1500 / 0.75), 2000 - 256) == 1744


def test_content_scale_is_the_servers_count_of_the_text_plus_its_framing():
    # 10 messages we count 400 tokens; the server counts their text 900 and adds 5 per message.
    assert content_scale(900, 10, 5.0, 400) == pytest.approx(950 / 400)
    assert content_scale(900, 10, 5.0, 0) is None


def test_observed_framing_is_what_the_prompt_holds_beyond_the_text_per_message():
    assert observed_framing(950, 900, 10) == 5.0
    assert observed_framing(800, 900, 10) == 0.0  # never negative
    assert observed_framing(9000, 900, 10) == 32.0  # a count that adds up several prompts is not believed
    assert observed_framing(950, 900, 0) is None


def test_smoothed_mean_uses_the_same_weights_arithmetically():
    assert smoothed_mean(None, 0, 4.0) == 4.0
    assert smoothed_mean(4.0, 1, 6.0) == pytest.approx(5.0)
    assert smoothed_mean(4.0, 50, 6.0) == pytest.approx(4.0 + SMOOTHING_WEIGHT * 2.0)


# ------------------------------------------------------------ the calibrator the graph runs on

REPORT = {"total_tokens": 1100, "tools_tokens": 100, "tools_server_tokens": None}


def test_the_calibrator_learns_from_usage_and_keeps_the_request_factor_without_it():
    fresh = Calibrator.from_state({})
    assert (fresh.scale, fresh.samples, fresh.framing) == (1.0, 0, None)
    # 1,320 reported for a request of 1,100 estimated (tools sent with it): 1.2 at once.
    first = fresh.learned(REPORT, real=1320, tools_sent=True, counted=None, messages=5, scale=1.0)
    assert (first.scale, first.samples) == (pytest.approx(1.2), 1)
    # Nothing observed (no usage, no server count): the factor the request was prepared at stays.
    assert first.learned(REPORT, real=None, tools_sent=True, counted=None, messages=5, scale=1.5).scale == 1.5
    # Answered without the tools: their definitions were not in the request.
    bare = fresh.learned(REPORT, real=1200, tools_sent=False, counted=None, messages=5, scale=1.0)
    assert bare.scale == pytest.approx(1.2)
    # The definitions' real cost known: the factor learns the messages alone.
    measured = fresh.learned({**REPORT, "tools_server_tokens": 300}, real=1500, tools_sent=True, counted=None,
                             messages=5, scale=1.0)
    assert measured.scale == pytest.approx(1.2)
    assert Calibrator.from_state(first.as_state()) == first


def test_the_calibrator_fits_a_request_to_the_servers_count_of_its_text():
    calibrator = Calibrator()
    fitted = calibrator.content_fit(REPORT, counted=1500, messages=5)
    assert fitted == pytest.approx((1500 + DEFAULT_FRAMING * 5) / 1000)
    assert Calibrator.refits(1.0, fitted, 0) and not Calibrator.refits(1.0, 1.02, 0)
    assert not Calibrator.refits(1.6, 1.5, 1)  # once refitted, only upwards
    assert not Calibrator.refits(1.0, 2.0, 2)  # twice at most
    assert calibrator.own_estimate(REPORT, 1500, 5) == round(fitted * 1000 + fitted * 100)
    # Without usage the server's count is the observation; with it, the template's framing is learnt.
    learned = calibrator.learned(REPORT, real=1560, tools_sent=True, counted=1500, messages=5, scale=1.0)
    assert learned.framing == pytest.approx((1560 - 1500) / 5) and learned.framing_samples == 1
    assert Calibrator.tightened(0.8) == 1.5 and Calibrator.tightened(2.0) == 3.0


def test_a_prompt_count_of_several_tool_calls_is_not_believed():
    assert Calibrator.reported_prompt_tokens({"input_tokens": 900}, tool_calls=1) == 900
    assert Calibrator.reported_prompt_tokens({"input_tokens": 1800}, tool_calls=2) is None  # one completion each
    assert Calibrator.reported_prompt_tokens(None, tool_calls=0) is None
