"""Pydantic schemas of the copilot API (they appear in the server's ``/openapi.json``).

Named like gns3-server's own (``XBase/XCreate/XUpdate/X``); request fields follow
GNS3 3.1's copilot chat API (``message, session_id, stream, mode``) so that a
client of one can talk to the other. An LLM config's fields are checked by the
model factory's JSON Schema, the single source of truth for its 422s, so here a
config is a plain object.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, field_validator
from pydantic.json_schema import JsonDict

from ..evidence.reads import Evidence
from ..service.session_ids import canonical_session_id
from ..service.session_store import TITLE_MAX, SessionRecord
from ..tools.approval import PendingApproval
from ..utf8 import UTF8Text

MAX_MESSAGE_CHARS = 100_000
"""Longest user message accepted (about 25k tokens); longer ones are a 422."""

TROUBLESHOOTING_INJECTION = "troubleshooting_injection"
"""GNS3 3.1's ``metadata.copilot_mode`` of a fault-injection session (its web UI shows a fault icon)."""

Mode = Literal["teaching", "lab_automation", "text"]  # the agent's MODES, plus GNS3 3.1's "text"
SessionId = Annotated[UTF8Text, AfterValidator(canonical_session_id)]
"""A session id from a client: a UUID in any spelling (case, braces, no hyphens) is its one spelling."""


def _approval(record: SessionRecord) -> Approval | None:
    pending = PendingApproval.from_stored(record.pending_value)
    return Approval(**pending.public()) if pending is not None else None


def session_timestamp(seconds: float) -> str:
    """GNS3 3.1's timestamps: ISO 8601 in UTC *without* a zone suffix (its web UI appends ``Z``
    itself, and shows "Invalid Date" for ``...ZZ``)."""
    return datetime.fromtimestamp(seconds, tz=UTC).replace(tzinfo=None).isoformat()


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain more than whitespace")
    return value


# ------------------------------------------------------------------------ chat


class RequestBody(BaseModel):
    """A request body: booleans are JSON booleans (``"stream": 0`` is a 422), numbers finite, text
    valid UTF-8 (``UTF8Text``: a lone surrogate is a 422 naming the field)."""

    model_config = ConfigDict(allow_inf_nan=False)


class ChatRequest(RequestBody):
    """One user message for a new or existing session of the project."""

    message: UTF8Text = Field(..., min_length=1, max_length=MAX_MESSAGE_CHARS, description="The user's message")
    session_id: SessionId | None = Field(
        None,
        description="Continue this session of yours; absent, or a well-formed UUID naming no session: a new one "
        "(with that id; GNS3 3.1's client chooses it)",
    )
    stream: StrictBool = Field(True, description="Stream events (text/event-stream); false: one JSON answer at the end")
    mode: Mode | None = Field(
        None,
        description="teaching (read-only tools) or lab_automation; absent or 'text' (GNS3 3.1): the server default",
    )
    llm_config_id: UTF8Text | None = Field(None, description="One of the user's LLM configs (default: the user's default)")

    _message_not_blank = field_validator("message")(_not_blank)


class ToolCallSummary(BaseModel):
    tool_call_id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    status: str | None = Field(default=None, description="success or error, once the tool has answered")


class Approval(BaseModel):
    """A request for the user's approval: bound to the session and the exact calls (digest), used once, expiring."""

    approval_id: str = Field(..., description="Echo it in .../confirm to make sure the decision is for this request")
    digest: str = Field(..., description="SHA-256 of the session id and the exact calls (device, driver, commands)")
    expires_at: float = Field(..., description="Seconds since the epoch (UTC) after which it can only be rejected")


class ChatResult(BaseModel):
    """The answer to ``stream: false``: what the stream would have carried, gathered."""

    session_id: str
    status: Literal["completed", "aborted", "waiting_confirmation"]
    content: str = Field(..., description="The final answer (the text of the run's last model call)")
    tool_calls: list[ToolCallSummary] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    pending_calls: list[ToolCallSummary] = Field(
        default_factory=list, description="status waiting_confirmation: the calls to approve or reject"
    )
    approval: Approval | None = Field(None, description="status waiting_confirmation: the approval asked for")
    evidence: dict[str, Any] | None = Field(
        None, description="The answer's claims judged against the turn's device reads (the evidence event)"
    )


class ConfirmRequest(RequestBody):
    """The user's decision on the tool calls a session waits for."""

    approved: StrictBool = Field(..., description="true: run them; false: reject them (nothing is sent)")
    approval_id: UTF8Text | None = Field(
        None, max_length=64, description="The approval_id of the confirm event: refused (409) unless it is the pending one"
    )
    stream: StrictBool = Field(True, description="Stream the resumed run's events; false: one JSON answer at the end")
    mode: Mode | None = Field(None, description="As for chat/stream")
    llm_config_id: UTF8Text | None = Field(None, description="As for chat/stream")


# -------------------------------------------------------------------- sessions


class SessionBase(RequestBody):
    title: UTF8Text = Field(..., min_length=1, max_length=TITLE_MAX)

    _title_not_blank = field_validator("title")(_not_blank)


class SessionUpdate(SessionBase):
    """Rename a session (GNS3 3.1: ``RenameSession``)."""


class Session(SessionBase):
    """A session as GNS3 3.1's ``ChatSession`` (thread_id, message_count, pinned, naive UTC
    timestamps...), plus our own fields under names 3.1 does not use."""

    session_id: str
    thread_id: str = Field(..., description="Same as session_id (GNS3 3.1 name)")
    user_id: str
    project_id: str
    created_at: str = Field(..., description="ISO 8601, UTC, no zone suffix (as GNS3 3.1)")
    updated_at: str = Field(..., description="ISO 8601, UTC, no zone suffix (as GNS3 3.1)")
    last_message_at: str | None = Field(None, description="When the last run ended (GNS3 3.1 name)")
    message_count: int = Field(0, description="Messages in the conversation (user, assistant, tool)")
    pinned: bool = Field(False, description="Pinned sessions are listed first")
    metadata: dict[str, Any] = Field(default_factory=dict, description="GNS3 3.1's session metadata")
    stats: dict[str, Any] = Field(default_factory=dict, description="GNS3 3.1's session statistics")
    runs: int = Field(0, description="Chat requests answered in this session")
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    running: bool = Field(False, description="A run is in progress (abort it, or wait for its done event)")
    pending_calls: list[ToolCallSummary] = Field(
        default_factory=list, description="Tool calls waiting for the user's approval (see .../confirm)"
    )
    approval: Approval | None = Field(None, description="The approval those calls wait for")

    @classmethod
    def from_record(cls, record: SessionRecord, *, running: bool) -> Session:
        return cls(
            session_id=record.session_id,
            thread_id=record.session_id,
            user_id=record.user_id,
            project_id=record.project_id,
            title=record.title,
            created_at=session_timestamp(record.created_at),
            updated_at=session_timestamp(record.updated_at),
            last_message_at=session_timestamp(record.updated_at) if record.runs else None,
            message_count=record.message_count,
            pinned=bool(record.pinned),
            metadata={"copilot_mode": TROUBLESHOOTING_INJECTION} if record.kind == "fault_injection" else {},
            runs=record.runs,
            input_tokens=record.input_tokens,
            output_tokens=record.output_tokens,
            total_tokens=record.total_tokens,
            running=running,
            pending_calls=[ToolCallSummary.model_validate(c) for c in record.pending_calls or []],
            approval=_approval(record),
        )


class ToolFunction(BaseModel):
    name: str
    arguments: str = Field(..., description="The arguments as a JSON text (OpenAI's shape)")


class HistoryToolCall(BaseModel):
    """A tool call as GNS3 3.1 (OpenAI) shapes it, plus ``name`` and ``args`` (ours, an object)."""

    id: str
    type: Literal["function"] = "function"
    function: ToolFunction
    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_call(cls, call: dict[str, Any]) -> HistoryToolCall:
        args = call.get("args") or {}
        arguments = json.dumps(args, ensure_ascii=False, default=str)
        return cls(id=call.get("id") or "", function=ToolFunction(name=call["name"], arguments=arguments),
                   name=call["name"], args=args)


class HistoryMessage(BaseModel):
    """A stored message as GNS3 3.1's ``OpenAIMessage`` (``id`` always set), plus ``status``."""

    id: str
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[HistoryToolCall] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: str | None = Field(None, description="Tool messages: success, error, ...")
    evidence: dict[str, Any] | None = Field(
        None, description="An answer's claims judged against the turn's device reads (the evidence event, as stored)"
    )

    @classmethod
    def from_stored(cls, message: dict[str, Any], fallback_id: str) -> HistoryMessage:
        """From the service's message dict; a message without an id gets ``fallback_id``."""
        data = dict(message)
        calls = data.pop("tool_calls", None)
        return cls(
            **{**data, "id": data.get("id") or fallback_id},
            tool_calls=[HistoryToolCall.from_call(c) for c in calls] if calls else None,
        )


class EvidenceRecord(BaseModel):
    """One device read kept as evidence (``evidence/reads.py``)."""

    id: str = Field(description="Its id in the session, e.g. E3 (what answers cite)")
    device: str
    device_label: str = Field(description="The device's name as shown to the model and in the panel (quoted when not "
                                          "a plain name, line breaks and control characters escaped)")
    command: str = Field(description="The command the device answered (GNS3's node reads: what GNS3 was asked)")
    status: str = Field(description="ok; error (the CLI answered with an error); failed (the console was not reachable)")
    source: Literal["console", "gns3"] = Field(description="console: the device's CLI said it; gns3: GNS3 said it")
    tool: str = Field(description="The tool whose call read it (copilot: read by the copilot after the answer)")
    tool_call_id: str
    turn_id: str = Field(description="The id of the user's message whose turn read it")
    at: float = Field(description="When it was read, seconds since the epoch")
    output: str | None = Field(None, description="What the device (or GNS3) answered; only on the record's own route")

    @classmethod
    def from_evidence(cls, evidence: Evidence, *, with_output: bool = False) -> EvidenceRecord:
        return cls(**evidence.public(with_output=with_output), turn_id=evidence.turn_id)


class SessionHistory(BaseModel):
    """GNS3 3.1's ``ConversationHistory`` plus ``session_id``."""

    session_id: str
    thread_id: str
    title: str
    messages: list[HistoryMessage]
    created_at: str | None = None
    updated_at: str | None = None


class AbortResult(BaseModel):
    status: Literal["ok"] = "ok"
    session_id: str


class ContextReport(BaseModel):
    """The budget report (tokens of system, topology, tools, history; limit; percent; drops)."""

    model_config = ConfigDict(extra="allow")

    strategy: str
    context_limit: int
    limit_tokens: int
    total_tokens: int
    percent: float


# ----------------------------------------------------------------- LLM configs


# A request's ``config`` is typed Any on purpose: pydantic's 422 (and the host's log
# line for it) would quote the offending input, which may hold an API key. The route
# checks the shape and the model factory's schema checks the fields, quoting nothing.
_OBJECT: JsonDict = {"type": "object", "additionalProperties": True}


class LLMConfigBase(RequestBody):
    config: Any = Field(
        None,
        description="An LLM config (schema: GET /v3/copilot/llm-configs/schema): model, context_limit, "
        "provider, base_url, api_key, ...",
        json_schema_extra=_OBJECT,
    )


class LLMConfigCreate(LLMConfigBase):
    is_default: StrictBool = Field(False, description="Make it the user's default (the first config always is)")


class LLMConfigUpdate(LLMConfigBase):
    """``config`` holds the fields to change; null removes one; api_key absent keeps the stored key."""


class LLMConfig(BaseModel):
    config: dict[str, Any] = Field(..., description="The config, api_key masked")
    config_id: str
    name: str
    has_api_key: bool
    is_default: bool
    created_at: datetime
    updated_at: datetime


class LLMConfigList(BaseModel):
    configs: list[LLMConfig]
    default_config_id: str | None = Field(None, description="The user's default config, if any")
    server_default: dict[str, Any] | None = Field(
        None, description="The server-wide default (used when the user has no default), key masked"
    )
    server_default_id: str | None = Field(
        None, description="The server-wide default's stable id (server-default; read-only), as GNS3 3.1's "
        "llm-model-configs routes list it; null when the server has none"
    )


class EffectiveLLMConfig(BaseModel):
    source: Literal["user", "server"]
    config_id: str | None = None
    config: dict[str, Any]


class InjectRequest(ChatRequest):
    """GNS3 3.1's ``chat/inject`` body (its ChatRequest, the message optional)."""

    message: UTF8Text = Field(
        "Inject a network fault for troubleshooting practice", min_length=1, max_length=MAX_MESSAGE_CHARS,
        description="What to break, e.g. 'Inject interface network fault(s)'; 'random' lets the copilot choose",
    )
    session_id: SessionId | None = Field(None, description="A new session's id (the client may choose it), or a "
                                   "fault-injection session of the caller's")
    mode: Mode | None = Field(None, description="Ignored: faults are injected with lab automation's tools")


class Fault(BaseModel):
    """One lab change made by a fault injection: revealed only to whoever injected it (and superadmins)."""

    fault_id: str
    session_id: str
    project_id: str
    user_id: str = Field(..., description="Who asked for the injection")
    tool: str
    args: dict[str, Any]
    status: str = Field(..., description="The tool's outcome: success or error")
    output: str
    created_at: str
    reverted_at: str | None = None
    revertible: bool = Field(..., description="POST .../revert can undo it (not yet reverted, and the copilot "
                             "knows how: a node stopped or suspended, a link changed, a VPCS address changed, a Linux "
                             "link, address or route changed with iproute2)")
    undo: dict[str, Any] | None = Field(
        None, description="The tool call the revert runs ({tool, args}), as recorded before the change; "
        "null: undo it by hand")


class ReloadResult(BaseModel):
    status: Literal["ok"] = "ok"
    sources: dict[str, str] = Field(..., description="Each prompt file, and where it was read from")


class ConsoleAuditEntry(BaseModel):
    """One command the copilot sent (or refused to send) to a device console."""

    id: int
    time: float = Field(..., description="Seconds since the epoch (UTC)")
    user: str = Field(..., description="GNS3 username the command was sent for")
    session: str = Field(..., description="Copilot session id")
    project: str = Field(..., description="Project id")
    device: str = Field(..., description="Node name")
    command: str
    outcome: str = Field(..., description="ok, error, timeout, blocked, denied (GNS3 permission), not_run or failed")
    detail: str = ""
    approval_id: str | None = Field(None, description="The approval the command ran under (configuration)")
    approval_digest: str | None = Field(None, description="Digest of the approved calls")
    approved_by: str | None = Field(None, description="GNS3 username who approved")
    approved_at: float | None = Field(None, description="When it was approved (seconds since the epoch, UTC)")


class NodeFamilyEvidence(BaseModel):
    """One thing read about a node that points to a CLI family."""

    source: str = Field(..., description="choice, tag, netmiko_device_type of the node/template, node type, image, "
                                         "docker image, template name, node name, prompt")
    value: str
    family: str | None = Field(None, description="The family it points to (null: a CLI with no console family)")
    confidence: str


class NodeFamily(BaseModel):
    """Which CLI family the copilot takes a node to run, why, and how sure it is."""

    node_id: str
    name: str
    family: str | None = Field(None, description="ios, linux, vpcs, frr, eos, junos, iosxr, nxos, srlinux, routeros, "
                                                 "vrp, vyos, fortios, cumulus; null when none fits")
    confidence: str | None = Field(None, description="chosen, explicit, high, medium, low (confirmed: by the prompt)")
    assumed: bool = Field(..., description="The family is a fallback or contradicted: say so, or ask")
    note: str = ""
    evidence: list[NodeFamilyEvidence]
    chosen_by: str | None = Field(None, description="Who chose the family for this node (if someone did)")
    chosen_at: float | None = None


class NodeFamilyUpdate(BaseModel):
    """A user's choice of a node's CLI family (null forgets it: detection decides again)."""

    model_config = ConfigDict(extra="forbid")

    family: str | None
