"""Evidence beside claims: what tools read from devices, kept, and the answer's claims judged against it.

``reads.py`` turns any tool's outcome into device reads; ``store.py`` keeps them
numbered per session (``E1``, ``E2`` ...) with each turn's judgement;
``claims.py`` finds what an answer claims about devices, ``facts.py`` reads
values and states on both sides, ``matcher.py`` judges; ``recorder.py`` ties
them to one run. ``docs/evidence.md`` describes the whole.
"""

from .claims import Claim, Fact, claims_of
from .matcher import NOT_VERIFIED, Judgement, Verdict, judge, judge_all
from .reads import DeviceRead, Evidence, reads_of
from .recorder import EvidenceRecorder, turn_of
from .store import EVIDENCE_SCHEMA, SQLiteEvidenceStore

__all__ = [
    "EVIDENCE_SCHEMA",
    "NOT_VERIFIED",
    "Claim",
    "DeviceRead",
    "Evidence",
    "EvidenceRecorder",
    "Fact",
    "Judgement",
    "SQLiteEvidenceStore",
    "Verdict",
    "claims_of",
    "judge",
    "judge_all",
    "reads_of",
    "turn_of",
]
