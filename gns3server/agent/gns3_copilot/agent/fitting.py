"""Fitting one request to the model's budget: the pre-model hook, and the server's own count.

:func:`hook_input` is the state the pre-model hook prepares a request from; the
graph's ``llm_call`` and the context preview build it alike, so the preview
reports the budget the next call will be judged in.

:class:`RequestFit` prepares the request (in a worker thread: tokenising is CPU
work) and, where the model server counts a request's own text
(``AgentSettings.count_text``), fits the factor to that content before the
request is sent (a JSON tool result costs some servers three times English):
prepared again while the fitted factor moves it by more than the tolerance, at
most twice (:meth:`~.context.calibration.Calibrator.refits`), and reported with
its own estimate in the server's tokens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from .context.calibration import Calibrator
from .context_manager import headline

log = logging.getLogger(__name__)

__all__ = ["Fitted", "RequestFit", "hook_input"]

Hook = Callable[[Mapping[str, Any]], dict[str, Any]]
CountText = Callable[[list[BaseMessage], bool], Awaitable[int | None]]


def hook_input(
    messages: Sequence[BaseMessage],
    topology: Any,
    scale: float,
    window: Any,
    summary: Any,
    *,
    tools_offered: bool,
    tools_server_tokens: int | None,
    calibrated: bool = False,
) -> dict[str, Any]:
    """What the pre-model hook prepares a request from (``create_pre_model_hook`` says what each is)."""
    return {
        "messages": messages,
        "topology_info": topology,
        "token_scale": scale,
        "token_scale_calibrated": calibrated,
        "context_window": window,
        "context_summary": summary,
        "tools_offered": tools_offered,
        "tools_server_tokens": tools_server_tokens,
    }


@dataclass(frozen=True)
class Fitted:
    """A prepared request: its messages, budget report and history window, the server's count of
    its text (None: unknown), and the factor it was prepared at."""

    messages: list[BaseMessage]
    report: dict[str, Any]
    window: Any
    counted: int | None
    scale: float


class RequestFit:
    """Prepares one model call's request, fitted to the server's count where there is one."""

    def __init__(
        self,
        hook: Hook,
        count_text: CountText | None,
        calibrator: Calibrator,
        messages: Sequence[BaseMessage],
        topology: Any,
        summary: Any,
        *,
        tools_offered: bool,
        tools_server_tokens: int | None,
    ) -> None:
        self._hook = hook
        self._count_text = count_text
        self._calibrator = calibrator
        self._messages = messages
        self._topology = topology
        self._summary = summary
        self._tools_offered = tools_offered
        self._tools_server_tokens = tools_server_tokens

    async def _prepare(self, scale: float, window: Any) -> tuple[list[BaseMessage], dict[str, Any], Any]:
        log.info("Calling pre_hook to prepare %d messages", len(self._messages))
        state = hook_input(self._messages, self._topology, scale, window, self._summary,
                           tools_offered=self._tools_offered, tools_server_tokens=self._tools_server_tokens,
                           calibrated=self._calibrator.samples > 0)
        # CPU-bound (tokenising, and loading an encoding the first time): off the loop.
        prepared = await asyncio.to_thread(self._hook, state)
        return prepared["messages"], prepared["context_report"], prepared.get("context_window", window)

    async def _count(self, prepared: list[BaseMessage]) -> int | None:
        if self._count_text is None:
            return None
        return await self._count_text(prepared, self._calibrator.with_tool_text)

    async def fit(self, scale: float, window: Any, *, refit: bool = True) -> Fitted:
        """The request prepared from ``window`` (the previous call's) at ``scale``, refitted if ``refit``."""
        calibrator = self._calibrator
        prepared, report, new_window = await self._prepare(scale, window)
        counted = await self._count(prepared)
        refits = 0
        while refit and counted is not None:
            fitted = calibrator.content_fit(report, counted, len(prepared))
            if not calibrator.refits(scale, fitted, refits):
                break
            scale, refits = fitted, refits + 1
            prepared, report, new_window = await self._prepare(scale, window)
            counted = await self._count(prepared)
        if counted is not None:  # the server counted this request's own text: its estimate, and the headline
            report = {**report, "server_tokens_estimate": calibrator.own_estimate(report, counted, len(prepared))}
            report.update(headline(report, calibrated=True))
        return Fitted(prepared, report, new_window, counted, scale)
