// HTTP client of the panel: GNS3's own API (login, user, projects) and the
// copilot's (/v3/copilot/...). Every route the panel uses is named here, so a
// change of the server's API is a change of this file only.
//
// Errors come back as ApiError with the server's safe message; the copilot's
// JSON errors carry `code` (e.g. "session_busy", "llm_not_configured") and, for
// an invalid LLM config (422), `field`, `rule` and `errors: [{field, rule, message}]`.

export class ApiError extends Error {
  constructor(status, body, fallback) {
    const message = messageOf(body) || fallback || `Request failed (HTTP ${status})`;
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = body && typeof body === "object" ? body.code || null : null;
    this.field = body && typeof body === "object" ? body.field || null : null;
    this.errors = body && typeof body === "object" && Array.isArray(body.errors) ? body.errors : [];
  }
}

function messageOf(body) {
  if (!body || typeof body !== "object") return "";
  if (typeof body.message === "string") return body.message;
  if (typeof body.detail === "string") return body.detail; // FastAPI's own shape
  return "";
}

async function readJson(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const enc = encodeURIComponent;

/** Log in to GNS3; resolves to the bearer token. */
export async function login(username, password) {
  const response = await fetch("/v3/access/users/authenticate", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  const body = await readJson(response);
  if (!response.ok) {
    const fallback = response.status === 401 ? "Wrong username or password." : undefined;
    throw new ApiError(response.status, body, fallback);
  }
  return body.access_token;
}

export class Api {
  /** @param {string} token GNS3 bearer token; @param {() => void} onUnauthorized */
  constructor(token, onUnauthorized = () => {}) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  async request(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const data = await readJson(response);
    if (!response.ok) {
      if (response.status === 401) this.onUnauthorized();
      throw new ApiError(response.status, data);
    }
    return data;
  }

  // -- GNS3 ------------------------------------------------------------------
  me() { return this.request("GET", "/v3/access/users/me"); }
  // The projects GNS3 lets this user open (GNS3 3.0's own list is empty for a role granted per project).
  projects() { return this.request("GET", "/v3/copilot/projects"); }

  // -- copilot sessions --------------------------------------------------------
  chatBase(projectId) { return `/v3/copilot/projects/${enc(projectId)}/chat`; }
  sessions(projectId) { return this.request("GET", `${this.chatBase(projectId)}/sessions`); }
  history(projectId, sessionId) {
    return this.request("GET", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}/history`);
  }
  rename(projectId, sessionId, title) {
    return this.request("PATCH", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}`, { title });
  }
  deleteSession(projectId, sessionId) {
    return this.request("DELETE", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}`);
  }
  abort(projectId, sessionId) {
    return this.request("POST", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}/abort`);
  }
  /** One session (its `pending_calls` list the tool calls waiting for the user's approval). */
  session(projectId, sessionId) {
    return this.request("GET", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}`);
  }
  /** One device read kept as evidence in the session (`id`: E1, E2 ...), with its output. */
  /** Run a change's recorded rollback (the POST is the approval), then its checks again. */
  rollback(projectId, changeId) {
    return this.request("POST", `/v3/copilot/projects/${enc(projectId)}/changes/${enc(changeId)}/rollback`);
  }
  evidence(projectId, sessionId, id) {
    return this.request("GET", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}/evidence/${enc(id)}`);
  }
  /** `llmConfigId`: the budget of that config (absent: the user's default). */
  context(projectId, sessionId, mode, llmConfigId) {
    const query = new URLSearchParams();
    if (mode) query.set("mode", mode);
    if (llmConfigId) query.set("llm_config_id", llmConfigId);
    const search = query.toString() ? `?${query}` : "";
    return this.request("GET", `${this.chatBase(projectId)}/sessions/${enc(sessionId)}/context${search}`);
  }

  /**
   * Start a run and iterate its events (`{type, ...}` objects, in order).
   * `onSession(id)` is called as soon as the session id is known (response
   * header, or the first event that carries one); `onMessage(id)` with the id the
   * message is stored with (response header). Aborting `signal` closes the
   * connection, which cancels the run on the server. `llmConfigId`: one of
   * the user's LLM configs (absent: the user's default, else the server's).
   */
  chat(projectId, { message, sessionId, mode, llmConfigId }, { signal, onSession, onMessage } = {}) {
    const payload = { message, stream: true, mode };
    if (sessionId) payload.session_id = sessionId;
    if (llmConfigId) payload.llm_config_id = llmConfigId;
    return this.eventStream(`${this.chatBase(projectId)}/stream`, payload, { signal, onSession, onMessage });
  }

  /**
   * Approve or reject the tool calls a session waits for; the resumed run's
   * events, exactly like chat(). Not waiting: ApiError 409 `no_pending_confirmation`;
   * `approvalId` not the pending one (used, or replaced): 409 `approval_not_pending`;
   * approving an expired approval: 410 `approval_expired`.
   */
  confirm(projectId, sessionId, { approved, mode, llmConfigId, approvalId }, { signal, onSession } = {}) {
    const payload = { approved: Boolean(approved), stream: true, mode };
    if (llmConfigId) payload.llm_config_id = llmConfigId;
    if (approvalId) payload.approval_id = approvalId;
    return this.eventStream(`${this.chatBase(projectId)}/sessions/${enc(sessionId)}/confirm`, payload,
      { signal, onSession });
  }

  async *eventStream(url, payload, { signal, onSession, onMessage } = {}) {
    const response = await fetch(url, {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(payload),
      signal,
    });
    if (!response.ok) {
      const data = await readJson(response);
      if (response.status === 401) this.onUnauthorized();
      throw new ApiError(response.status, data);
    }
    const headerSession = response.headers.get("X-Copilot-Session-Id");
    if (headerSession && onSession) onSession(headerSession);
    const headerMessage = response.headers.get("X-Copilot-Message-Id");
    if (headerMessage && onMessage) onMessage(headerMessage);
    yield* parseEventStream(response.body, (event) => {
      if (onSession && typeof event.session_id === "string") onSession(event.session_id);
    });
  }

  // -- LLM configs (the user's own; the server-wide default is read-only) -----
  // GET -> {configs: [{config_id, name, config (api_key masked), has_api_key, is_default}],
  //         default_config_id, server_default}
  llmConfigs() { return this.request("GET", "/v3/copilot/llm-configs"); }
  createLlmConfig(config, isDefault) {
    return this.request("POST", "/v3/copilot/llm-configs", { config, is_default: Boolean(isDefault) });
  }
  /** `changes`: fields to set; null removes a field; no api_key keeps the stored key. */
  updateLlmConfig(configId, changes) {
    return this.request("PUT", `/v3/copilot/llm-configs/${enc(configId)}`, { config: changes });
  }
  deleteLlmConfig(configId) { return this.request("DELETE", `/v3/copilot/llm-configs/${enc(configId)}`); }
  setDefaultLlmConfig(configId) {
    return this.request("PUT", `/v3/copilot/llm-configs/default/${enc(configId)}`);
  }
  clearDefaultLlmConfig() { return this.request("DELETE", "/v3/copilot/llm-configs/default"); }

  // -- graded labs (docs/teaching.md): who is a teacher is the server's answer (`results().teacher`)
  teachingBase(projectId) { return `/v3/copilot/projects/${enc(projectId)}/teaching`; }
  scenarios() { return this.request("GET", "/v3/copilot/teaching/scenarios"); }
  assignments(projectId) { return this.request("GET", `${this.teachingBase(projectId)}/assignments`); }
  /** `body`: {scenario_ids} or {level, count, seed}, optional time_limit_minutes; answers once broken. */
  assign(projectId, body) { return this.request("POST", `${this.teachingBase(projectId)}/assignments`, body); }
  checkWork(projectId, assignmentId) {
    return this.request("POST", `${this.teachingBase(projectId)}/check`, { assignment_id: assignmentId });
  }
  /** The next hint; every one served: ApiError 409 `no_more_hints`. */
  nextHint(projectId, assignmentId) {
    return this.request("POST", `${this.teachingBase(projectId)}/assignments/${enc(assignmentId)}/hint`);
  }
  closeAssignment(projectId, assignmentId) {
    return this.request("POST", `${this.teachingBase(projectId)}/assignments/${enc(assignmentId)}/close`);
  }
  /** {teacher, results}: every student's rows for a teacher, the caller's own otherwise. */
  labResults(projectId) { return this.request("GET", `${this.teachingBase(projectId)}/results`); }
  /** The results as CSV text (teachers only). */
  async labResultsCsv(projectId) {
    const response = await fetch(`${this.teachingBase(projectId)}/results.csv`, { headers: this.headers() });
    if (!response.ok) {
      const data = await readJson(response);
      if (response.status === 401) this.onUnauthorized();
      throw new ApiError(response.status, data);
    }
    return response.text();
  }
}

/** Parse a text/event-stream body: yields the JSON of every `data:` event. */
export async function* parseEventStream(body, observe = () => {}) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        finished = true;
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      let boundary;
      while ((boundary = buffer.search(/\r?\n\r?\n/)) !== -1) {
        const block = buffer.slice(0, boundary);
        buffer = buffer.slice(boundary).replace(/^\r?\n\r?\n/, "");
        const event = parseBlock(block);
        if (event) {
          observe(event);
          yield event;
        }
      }
    }
    const last = parseBlock(buffer + decoder.decode());
    if (last) {
      observe(last);
      yield last;
    }
  } finally {
    // A consumer that stops early closes the connection (the server then cancels the run).
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

function parseBlock(block) {
  const data = block
    .split(/\r?\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).replace(/^ /, ""))
    .join("\n");
  if (!data) return null;
  try {
    const event = JSON.parse(data);
    return event && typeof event === "object" && typeof event.type === "string" ? event : null;
  } catch {
    return null;
  }
}
