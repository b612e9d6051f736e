"""One run's evidence: what its tool calls read, stored as they end, and its answer judged.

The service makes an :class:`EvidenceRecorder` for each chat run, bound to the
session and the turn (the user's message that opened it: a run resumed after an
approval continues its turn). The gate hands it every call's outcome
(:meth:`EvidenceRecorder.record` is one of its after-callbacks): the reads are
stored, numbered, and their ids (:meth:`EvidenceRecorder.noted`) go to the model
with the tool's output (``"evidence": {"E3": "PC1 \"show ip\""}``), so that
it can cite them. Once the run has
answered, :meth:`EvidenceRecorder.judge` finds the claims of the turn's answer
(``claims.py``), reads from GNS3 the nodes they name that no tool of the turn
read from GNS3 (their status and links: the model was shown them in its
topology), judges every claim against the turn's reads (``matcher.py``), stores
the judgement and returns the ``evidence`` event.

Evidence never fails a run: a store that fails is logged and the run goes on
without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ..agent.context.counting import content_text
from ..as_data import as_data, json_as_data
from ..gns3_client.topology import Topology
from ..tools.errors import failure_outcome
from ..tools.gate import ToolOutcome
from .claims import claims_of, mentioned
from .matcher import NOT_VERIFIED, Judgement, judge_all
from .reads import DeviceRead, Evidence, node_read, reads_of
from .store import SQLiteEvidenceStore

log = logging.getLogger(__name__)

__all__ = ["AFTER_ANSWER", "EvidenceRecorder", "note", "turn_of"]

AFTER_ANSWER = "copilot"
"""The tool name of the node reads the copilot makes itself once the answer is given."""
NOTE_ITEMS = 12


def turn_of(messages: Sequence[BaseMessage]) -> str:
    """The id of the user's message that opened the conversation's last turn ("" if none)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.id or ""
    return ""


def _span(records: Sequence[Evidence]) -> str:
    first, last = records[0].evidence_id, records[-1].evidence_id
    return first if first == last else f"{first}-{last}"


def note(records: Sequence[Evidence]) -> dict[str, str]:
    """The ids of what a call read, each with what it is, for the model (``E3``: ``PC1 "show ip"``)."""
    console = [r for r in records if r.source == "console"]
    nodes = [r for r in records if r.source == "gns3"]
    items = {r.evidence_id: f"{as_data(r.device)} {as_data(r.command)}" for r in console[:NOTE_ITEMS]}
    if len(console) > NOTE_ITEMS:
        items[_span(console[NOTE_ITEMS:])] = f"{len(console) - NOTE_ITEMS} more reads"
    if nodes:
        names = ", ".join(as_data(r.device) for r in nodes[:NOTE_ITEMS]) + (" ..." if len(nodes) > NOTE_ITEMS else "")
        items[_span(nodes)] = f"GNS3 status and links of {names}"
    return items


def _answers(messages: Sequence[BaseMessage]) -> list[AIMessage]:
    """The assistant's messages with text in the last turn."""
    answers: list[AIMessage] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and content_text(message.content).strip():
            answers.append(message)
    return answers[::-1]


def _nodes(topology: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The nodes of a REST-shaped topology (``fetch_rest_topology``), with their links resolved."""
    if not topology:
        return []
    project = {k: topology.get(k) for k in ("project_id", "name", "status")}
    nodes: list[Mapping[str, Any]] = Topology.from_rest(project, topology.get("nodes") or [],
                                                        topology.get("links") or []).to_dict()["nodes"]
    return nodes


class EvidenceRecorder:
    """The evidence of one run of one turn (see the module's docstring)."""

    def __init__(
        self, store: SQLiteEvidenceStore, session_id: str, turn_id: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self.session_id = session_id
        self.turn_id = turn_id
        self._clock = clock
        self._noted: dict[str, dict[str, str]] = {}

    async def record(self, outcome: ToolOutcome) -> None:
        """Store what the call read (the gate's after-callback: it runs even when the run is cancelled
        now); its ids wait for :meth:`noted`."""
        failure = failure_outcome(outcome.error) if outcome.error is not None else None
        reads = reads_of(outcome, failure)
        if not reads:
            return
        try:
            stored = await self._store.add(self.session_id, self.turn_id, reads, self._clock())
        except Exception:
            log.exception("Could not store the evidence of %s in session %s", outcome.name, self.session_id)
            return
        self._noted[outcome.call_id] = note(stored)

    def noted(self, outcome: ToolOutcome) -> str:
        """What the model reads of the call: its output with the ids :meth:`record` kept its reads under,
        under an ``evidence`` key of a result that is a JSON object, else on a line after the text."""
        ids = self._noted.pop(outcome.call_id, {})
        if not ids:
            return outcome.output
        if outcome.status == "success" and isinstance(outcome.result, Mapping) and "evidence" not in outcome.result:
            return json_as_data({**outcome.result, "evidence": ids})  # as the gate renders a result
        return outcome.output + "\n[evidence: " + "; ".join(f"{k} = {v}" for k, v in ids.items()) + "]"

    async def judge(self, messages: Sequence[BaseMessage], topology: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The turn's answer judged (the ``evidence`` event's body, stored), or None: no answer,
        nothing read and nothing claimed. ``topology``: the project's, as the run loads it (or None)."""
        answers = _answers(messages)
        if not answers:
            return None
        reads = await self._store.turn(self.session_id, self.turn_id)
        nodes = {str(n.get("name")): n for n in _nodes(topology)}
        names = list(dict.fromkeys([*nodes, *(r.device for r in reads)]))
        text = "\n".join(content_text(a.content) for a in answers)
        named = mentioned(text, names)
        read_in_gns3 = {r.device.casefold() for r in reads if r.source == "gns3"}
        fresh: list[DeviceRead] = [
            node_read(node, AFTER_ANSWER) for name, node in nodes.items()
            if name in named and name.casefold() not in read_in_gns3
        ]
        if fresh:
            reads += await self._store.add(self.session_id, self.turn_id, fresh, self._clock())

        def work() -> list[Judgement]:
            claims = [c for a in answers for c in claims_of(content_text(a.content), names, a.id or "")]
            return judge_all(claims, reads)

        judged = await asyncio.to_thread(work)  # regular expressions over outputs of up to 64 KiB each
        if not judged and not any(r.source == "console" for r in reads):
            return None
        body = await self._body(answers[-1].id or "", reads, judged)
        await self._store.save_judgement(self.session_id, self.turn_id, body["message_id"], body, self._clock())
        return body

    async def _body(self, message_id: str, reads: Sequence[Evidence], judged: Sequence[Judgement]) -> dict[str, Any]:
        linked = {i for j in judged for i in j.evidence}
        unverified = [d for j in judged if j.verdict == "unverified" for d in j.claim.devices]
        earlier = await self._store.latest(self.session_id, list(dict.fromkeys(unverified)), self.turn_id)
        claims = []
        for judgement in judged:
            shown = judgement.public()
            older = [earlier[d.casefold()] for d in judgement.claim.devices if d.casefold() in earlier]
            if judgement.verdict == "unverified" and older:
                shown["earlier"] = [e.public() for e in older]
            claims.append(shown)
        counts = {
            "claims": len(judged),
            "verified": sum(j.verdict == "verified" for j in judged),
            "contradicted": sum(j.verdict == "contradicted" for j in judged),
            "not_verified": sum(j.verdict in NOT_VERIFIED for j in judged),
        }
        shown_reads = [r.public() for r in reads if r.source == "console" or r.evidence_id in linked]
        return {"turn_id": self.turn_id, "message_id": message_id, "reads": shown_reads, "claims": claims,
                "counts": counts}
