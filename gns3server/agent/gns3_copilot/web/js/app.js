// The copilot panel: sign-in, project and conversation choice, streaming chat,
// tool cards, the context meter, the LLM settings and each conversation's LLM.
// State lives in `state`; the DOM is updated by the functions below, never from
// strings of HTML.

import { Api, ApiError, login } from "./api.js";
import { savedToken, saveToken, signOut, webUiTokens } from "./auth.js";
import { confirmCard, describeReport, el, markdownFragment, toolCard, updateToolCard } from "./render.js";
import { openSettings, initSettings } from "./settings.js";
import { initMcpSettings } from "./mcp.js"; // issue 16: MCP endpoint and keys in the settings dialog

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(window.location.search);

const state = {
  api: null,
  user: null,
  projects: [],
  projectId: params.get("project_id") || null,
  sessions: [],
  sessionId: params.get("session_id") || null,
  mode: ["lab_automation", "teaching"].includes(localStorage.getItem("gns3-copilot.mode"))
    ? localStorage.getItem("gns3-copilot.mode") : "lab_automation",
  llm: { configs: [], defaultId: "", serverDefault: null, choices: [] }, // the user's LLM configs
  llmConfigId: "", // the config this conversation uses ("": none named, the server decides)
  llmChosen: false, // a new conversation's LLM was picked by the user (remembered once it has an id)
  run: null, // {controller, sessionId, turn, stopped}
  loadToken: 0, // bumped by every navigation and send: a load that finishes late changes nothing
};

// ---------------------------------------------------------------- utilities

function show(view) {
  $("boot").hidden = true;
  $("login-view").hidden = view !== "login";
  $("main-view").hidden = view !== "main";
}

function updateUrl() {
  const url = new URL(window.location.href);
  if (state.projectId) url.searchParams.set("project_id", state.projectId);
  else url.searchParams.delete("project_id");
  if (state.sessionId) url.searchParams.set("session_id", state.sessionId);
  else url.searchParams.delete("session_id");
  window.history.replaceState(null, "", url);
}

/** The notice above the conversation: kind is "error", "warn" or "info". */
function notify(kind, text, action) {
  const box = $("notice");
  box.className = `alert alert-${kind}`;
  box.dataset.kind = kind;
  box.dataset.code = action?.code || "";
  $("notice-text").textContent = text;
  const button = $("notice-action");
  button.hidden = !action;
  button.textContent = action ? action.label : "";
  noticeAction = action ? action.run : null;
  box.hidden = false;
}

let noticeAction = null;

function clearNotice() {
  $("notice").hidden = true;
}

const settingsAction = { label: "Open LLM settings", code: "llm_not_configured", run: () => openSettings() };

/** Tell the user what went wrong with a request, in words they can act on. */
function reportError(error, context) {
  if (!(error instanceof ApiError)) {
    notify("error", `${context}: the GNS3 server could not be reached.`);
    return;
  }
  if (error.status === 401) return; // back to the sign-in form already
  if (error.code === "llm_not_configured") {
    notify("warn", "No LLM is configured yet. Add one in the LLM settings to start chatting.", settingsAction);
  } else if (error.code === "confirmation_pending") {
    notify("warn", `${error.message || "This conversation waits for your approval."} ` +
      "Approve or reject the configuration in the conversation first.", { label: "Show it", code: error.code,
      run: () => focusConfirmCard() });
  } else if (error.code === "no_pending_confirmation" || error.code === "approval_not_pending") {
    notify("warn", error.message || "Nothing waits for an approval in this conversation any more.");
  } else if (error.code === "approval_expired") {
    notify("warn", error.message || "This approval has expired: reject it, then ask again.");
  } else if (error.code === "session_busy" || error.status === 409) {
    notify("warn", "This conversation is still answering another request (perhaps in another window). " +
      "Wait for it to finish, or stop it.", {
      label: "Stop it", code: "session_busy", run: () => abortRemote(state.sessionId),
    });
  } else if (error.code === "api_key_unreadable") {
    notify("error", `${error.message} Enter the API key again in the LLM settings.`, settingsAction);
  } else {
    notify("error", `${context}: ${error.message}`);
  }
}

function onUnauthorized() {
  delete document.body.dataset.ready;
  signOut();
  state.api = null;
  $("login-error").textContent = "Your GNS3 session has expired; sign in again.";
  $("login-error").hidden = false;
  show("login");
  $("login-username").focus();
}

// ---------------------------------------------------------------- sign-in

async function tryToken(token) {
  const api = new Api(token, onUnauthorized);
  try {
    const user = await new Api(token).me();
    return { api, user };
  } catch {
    return null;
  }
}

async function boot() {
  const candidates = [savedToken(), ...webUiTokens(params.get("controller_id"))].filter(Boolean);
  for (const token of [...new Set(candidates)]) {
    const found = await tryToken(token);
    if (found) {
      saveToken(token);
      await enter(found);
      return;
    }
  }
  show("login");
  $("login-username").focus();
}

async function onLogin(event) {
  event.preventDefault();
  const username = $("login-username").value.trim();
  const password = $("login-password").value;
  const error = $("login-error");
  error.hidden = true;
  if (!username || !password) {
    error.textContent = "Enter your GNS3 username and password.";
    error.hidden = false;
    return;
  }
  $("login-submit").disabled = true;
  try {
    const token = await login(username, password);
    const found = await tryToken(token);
    if (!found) throw new ApiError(401, null, "The server did not accept the new session.");
    saveToken(token);
    $("login-password").value = "";
    await enter(found);
  } catch (err) {
    error.textContent = err instanceof ApiError ? err.message : "The GNS3 server could not be reached.";
    error.hidden = false;
  } finally {
    $("login-submit").disabled = false;
  }
}

async function enter({ api, user }) {
  state.api = api;
  state.user = user;
  $("user-name").textContent = user.username || "";
  $("mode-select").value = state.mode;
  show("main");
  const llm = await loadLlmConfigs();
  await loadProjects();
  checkLlmConfigured(llm);
  document.body.dataset.ready = "true";
}

function onLogout() {
  if (state.run) stopRun();
  delete document.body.dataset.ready;
  signOut();
  state.api = null;
  state.user = null;
  $("login-error").hidden = true;
  show("login");
  $("login-username").focus();
}

// ---------------------------------------------------------------- projects

async function loadProjects() {
  const select = $("project-select");
  try {
    state.projects = (await state.api.projects()).sort((a, b) => String(a.name).localeCompare(String(b.name)));
  } catch (error) {
    reportError(error, "Could not list the projects");
    return;
  }
  select.replaceChildren();
  if (!state.projects.length) {
    select.append(el("option", null, "No project"));
    select.disabled = true;
    setComposerEnabled(false);
    $("empty-chat").replaceChildren(el("h2", null, "No project yet"),
      el("p", "muted", "Create or open a project in GNS3 (or ask for access to one), then reload this panel."));
    return;
  }
  select.disabled = false;
  const placeholder = el("option", null, "Choose a project…");
  placeholder.value = "";
  select.append(placeholder);
  for (const project of state.projects) {
    const option = el("option", null, project.status === "closed" ? `${project.name} (closed)` : project.name);
    option.value = project.project_id;
    select.append(option);
  }
  const known = state.projects.some((p) => p.project_id === state.projectId);
  if (state.projectId && !known) {
    notify("warn", "The project in the address is not one you can see; choose another.");
    state.projectId = null;
    state.sessionId = null;
  }
  select.value = state.projectId || "";
  if (!state.projectId) $("project-select").focus();
  await selectProject(state.projectId, { keepSession: true });
}

async function selectProject(projectId, { keepSession = false } = {}) {
  const token = ++state.loadToken;
  state.projectId = projectId || null;
  if (!keepSession) state.sessionId = null;
  updateUrl();
  setComposerEnabled(Boolean(state.projectId));
  if (!state.projectId) {
    state.sessions = [];
    renderSessions();
    clearConversation();
    return;
  }
  await loadSessions();
  if (token !== state.loadToken) return; // the user moved on (or sent a message) meanwhile
  if (state.sessionId && !state.sessions.some((s) => s.session_id === state.sessionId)) {
    state.sessionId = null;
    updateUrl();
  }
  await openSession(state.sessionId, token);
}

// ---------------------------------------------------------------- sessions

async function loadSessions() {
  const projectId = state.projectId;
  if (!projectId) return;
  let sessions;
  try {
    sessions = await state.api.sessions(projectId);
  } catch (error) {
    reportError(error, "Could not list the conversations");
    sessions = [];
  }
  if (projectId !== state.projectId) return; // another project was chosen meanwhile
  state.sessions = Array.isArray(sessions) ? sessions : sessions.sessions || [];
  renderSessions();
}

function renderSessions() {
  const list = $("session-list");
  // The list is rebuilt (e.g. when a turn ends): keep the keyboard focus on the same button.
  const focused = list.contains(document.activeElement) ? document.activeElement : null;
  const focusedId = focused?.closest(".session-item")?.dataset.sessionId;
  const focusedClass = focused && ["session-open", "session-rename", "session-delete"].find((c) => focused.classList.contains(c));
  list.replaceChildren();
  $("sessions-empty").hidden = state.sessions.length > 0 || !state.projectId;
  for (const session of state.sessions) {
    const item = el("li", "session-item");
    item.dataset.sessionId = session.session_id;
    const current = session.session_id === state.sessionId;
    if (current) item.classList.add("current");
    const open = el("button", "session-open", session.title || "Untitled");
    open.type = "button";
    open.title = session.title || "Untitled";
    if (current) open.setAttribute("aria-current", "true");
    open.addEventListener("click", () => switchSession(session.session_id));
    const rename = el("button", "icon-button session-rename", "\u270E");
    rename.type = "button";
    rename.title = "Rename";
    rename.setAttribute("aria-label", `Rename “${session.title || "Untitled"}”`);
    rename.addEventListener("click", () => startRename(item, session));
    const remove = el("button", "icon-button session-delete", "\u00D7");
    remove.type = "button";
    remove.title = "Delete";
    remove.setAttribute("aria-label", `Delete “${session.title || "Untitled"}”`);
    remove.addEventListener("click", () => deleteSession(session));
    item.append(open, rename, remove);
    list.append(item);
  }
  if (focusedId && focusedClass) {
    list.querySelector(`[data-session-id="${CSS.escape(focusedId)}"] .${focusedClass}`)?.focus();
  }
}

function busyGuard() {
  if (!state.run) return false;
  notify("warn", "Stop the current answer (Esc) before changing conversation.");
  return true;
}

async function switchSession(sessionId) {
  if (busyGuard()) return;
  state.sessionId = sessionId;
  updateUrl();
  renderSessions();
  closeSidebarOnSmallScreens();
  await openSession(sessionId);
  $("prompt").focus();
}

function newSession() {
  if (busyGuard() || !state.projectId) return;
  state.loadToken++;
  state.sessionId = null;
  state.llmChosen = false;
  resolveLlmChoice();
  updateUrl();
  renderSessions();
  clearConversation();
  clearNotice();
  closeSidebarOnSmallScreens();
  $("prompt").focus();
}

function startRename(item, session) {
  const input = el("input", "session-rename-input");
  input.value = session.title || "";
  input.maxLength = 200;
  input.setAttribute("aria-label", "New title (Enter to save, Esc to cancel)");
  const open = item.querySelector(".session-open");
  open.hidden = true;
  item.insertBefore(input, open);
  input.focus();
  input.select();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const title = input.value.trim();
    if (save && title && title !== session.title) {
      try {
        await state.api.rename(state.projectId, session.session_id, title);
        session.title = title;
      } catch (error) {
        reportError(error, "Could not rename the conversation");
      }
    }
    renderSessions();
    $("session-list").querySelector(`[data-session-id="${CSS.escape(session.session_id)}"] .session-open`)?.focus();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      finish(true);
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      finish(false);
    }
  });
  input.addEventListener("blur", () => finish(true));
}

function confirmDialog(text, okLabel) {
  const dialog = $("confirm-dialog");
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    $("confirm-ok").focus();
  });
}

async function deleteSession(session) {
  if (state.run && state.run.sessionId === session.session_id) {
    notify("warn", "Stop the current answer before deleting its conversation.");
    return;
  }
  const ok = await confirmDialog(`Delete the conversation “${session.title || "Untitled"}”? This cannot be undone.`,
    "Delete");
  if (!ok) return;
  try {
    await state.api.deleteSession(state.projectId, session.session_id);
  } catch (error) {
    reportError(error, "Could not delete the conversation");
    return;
  }
  localStorage.removeItem(llmKey(session.session_id));
  if (state.sessionId === session.session_id) {
    state.sessionId = null;
    state.llmChosen = false;
    resolveLlmChoice();
    updateUrl();
    clearConversation();
  }
  await loadSessions();
  $("new-session").focus();
}

// ---------------------------------------------------------------- conversation view

function clearConversation() {
  const messages = $("messages");
  messages.replaceChildren($("empty-chat") || emptyChat());
  $("empty-chat").hidden = false;
  resetMeter();
}

function emptyChat() {
  const box = el("div", "empty-chat");
  box.id = "empty-chat";
  box.append(el("h2", null, "Ask about this project"));
  return box;
}

function hideEmpty() {
  const empty = $("empty-chat");
  if (empty) empty.hidden = true;
}

function nearBottom(box) {
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollDown(force = false) {
  const box = $("messages");
  if (force || box.dataset.follow !== "false") box.scrollTop = box.scrollHeight;
}

/** A user message; `id`: the id it is stored with (the summary marker is placed by it). */
function userBubble(text, id) {
  const item = el("article", "message message-user");
  item.setAttribute("aria-label", "You");
  if (id) item.dataset.messageId = id;
  item.append(el("div", "bubble", text));
  return item;
}

/** An assistant turn: text segments and tool cards in the order they happened. */
class Turn {
  constructor() {
    this.node = el("article", "message message-assistant");
    this.node.setAttribute("aria-label", "Copilot");
    this.cards = new Map();
    this.segment = null;
    this.text = "";
    this.timer = null;
  }

  appendText(chunk) {
    if (!this.segment) {
      this.segment = el("div", "bubble markdown");
      this.node.append(this.segment);
      this.text = "";
    }
    this.text += chunk;
    if (!this.timer) this.timer = setTimeout(() => this.flush(), 40);
  }

  flush() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.segment) {
      this.segment.replaceChildren(markdownFragment(this.text));
      scrollDown();
    }
  }

  card(event) {
    let card = this.cards.get(event.tool_call_id);
    if (!card) {
      this.flush();
      this.segment = null; // text after a tool call starts a new segment
      card = toolCard({ id: event.tool_call_id, name: event.name, args: event.args });
      this.cards.set(event.tool_call_id, card);
      this.node.append(card);
      scrollDown();
    }
    return card;
  }

  note(kind, text) {
    this.flush();
    this.segment = null;
    const note = el("p", `turn-note turn-note-${kind}`, text);
    if (kind === "error") note.setAttribute("role", "alert");
    this.node.append(note);
    scrollDown();
  }

  finish(status) {
    this.flush();
    for (const card of this.cards.values()) {
      if (card.dataset.status === "pending" || card.dataset.status === "running") {
        const end = status === "waiting_confirmation" ? "waiting" : status === "aborted" ? "aborted" : "error";
        updateToolCard(card, { status: end });
      }
    }
    this.node.dataset.status = status;
  }
}

function renderHistory(messages) {
  const box = $("messages");
  box.replaceChildren($("empty-chat") || emptyChat());
  hideEmpty();
  let turn = null;
  for (const message of messages) {
    if (message.role === "user") {
      turn = null;
      box.append(userBubble(message.content, message.id));
    } else if (message.role === "assistant") {
      if (!turn) {
        turn = new Turn();
        box.append(turn.node);
      }
      if (message.content) {
        turn.segment = null;
        turn.appendText(message.content);
        turn.flush();
        turn.segment = null;
      }
      for (const call of message.tool_calls || []) turn.card({ tool_call_id: call.id, name: call.name, args: call.args });
    } else if (message.role === "tool") {
      if (!turn) {
        turn = new Turn();
        box.append(turn.node);
      }
      const card = turn.card({ tool_call_id: message.tool_call_id, name: message.name, args: undefined });
      updateToolCard(card, { status: message.status || "success", output: message.content });
    }
  }
  if (!messages.length) $("empty-chat").hidden = false;
  box.dataset.follow = "true";
  scrollDown(true);
  return turn; // the last assistant turn (null if the conversation ends with the user)
}

async function openSession(sessionId, token = ++state.loadToken) {
  if ($("notice").dataset.code !== "llm_not_configured") clearNotice(); // that one stays until fixed
  state.llmChosen = false;
  resolveLlmChoice(); // this conversation's LLM (a new one: the default)
  if (!sessionId) {
    clearConversation();
    return;
  }
  let history;
  let session;
  try {
    [history, session] = await Promise.all([
      state.api.history(state.projectId, sessionId),
      state.api.session(state.projectId, sessionId).catch(() => null), // pending calls: a courtesy
    ]);
  } catch (error) {
    if (token !== state.loadToken) return;
    reportError(error, "Could not load the conversation");
    return;
  }
  if (token !== state.loadToken) return;
  const turn = renderHistory(Array.isArray(history) ? history : history.messages || []);
  const pending = Array.isArray(session?.pending_calls) ? session.pending_calls : [];
  if (pending.length) {
    let owner = turn;
    if (!owner) {
      owner = new Turn();
      $("messages").append(owner.node);
    }
    owner.node.dataset.status = "waiting_confirmation";
    showConfirmCard(owner, pending, sessionId, session?.approval?.approval_id);
    scrollDown(true);
    focusConfirmCard();
  }
  refreshMeter(sessionId, token);
}

// ---------------------------------------------------------------- context meter

function resetMeter() {
  const meter = $("meter");
  meter.dataset.state = "empty";
  meter.dataset.total = "";
  meter.dataset.percent = "";
  $("meter-text").textContent = "no model call yet";
  $("meter-bar").style.width = "0%";
  $("meter-notes").hidden = true;
  meter.querySelector(".meter-track").setAttribute("aria-valuenow", "0");
}

function showReport(report, preview = false) {
  if (!report || typeof report !== "object") return;
  const info = describeReport(report);
  const meter = $("meter");
  meter.dataset.state = report.over_budget ? "over" : info.percent >= (info.budgetShare ?? 100) * 0.9 ? "high" : "ok";
  meter.dataset.preview = preview ? "true" : "false";
  meter.dataset.total = String(report.headline_tokens ?? report.total_tokens ?? "");
  meter.dataset.percent = String(report.headline_percent ?? report.percent ?? "");
  meter.title = info.detail;
  $("meter-text").textContent = preview ? `${info.headline} (next call)` : info.headline;
  $("meter-bar").style.width = `${info.percent}%`;
  meter.querySelector(".meter-track").setAttribute("aria-valuenow", String(Math.round(info.percent)));
  const notes = $("meter-notes");
  notes.textContent = info.notes.join(" · ");
  notes.hidden = info.notes.length === 0;
  showSummaryMarker(report);
}

/** Mark where earlier conversation was summarised: before the first message still sent (expandable). */
function showSummaryMarker(report) {
  const box = $("messages");
  let marker = box.querySelector(".summary-marker");
  if (!report.summary_text) {
    if (marker && report.summarized_turns === 0) marker.remove();
    return;
  }
  if (!marker) {
    marker = document.createElement("details");
    marker.className = "summary-marker";
    const head = document.createElement("summary");
    const text = document.createElement("div");
    text.className = "summary-text";
    marker.append(head, text);
  }
  const turns = report.summarized_turns ?? 0;
  // 0 tokens: a summary stored but not in this request (it goes out with the next question).
  const cost = report.summary_tokens ? ` (${report.summary_tokens} tokens)` : "";
  marker.firstChild.textContent = `Earlier conversation summarised: ${turns} turn${turns === 1 ? "" : "s"}${cost}`;
  marker.lastChild.textContent = report.summary_text;
  // Right after what the summary covers: before the message the report names as the first one
  // after it. Not shown here (an id the page does not know): at the top of the conversation.
  const until = report.summary_until_id;
  const anchor = until
    ? [...box.querySelectorAll(".message-user")].find((node) => node.dataset.messageId === until)
    : null;
  if (anchor) box.insertBefore(marker, anchor);
  else box.insertBefore(marker, box.querySelector(".message"));
}

async function refreshMeter(sessionId, token) {
  try {
    const report = await state.api.context(state.projectId, sessionId, state.mode, state.llmConfigId || undefined);
    if (token === state.loadToken && !state.run) showReport(report.report || report, true);
  } catch {
    // No LLM configured or the topology is unavailable: the meter waits for the next run.
  }
}

// ---------------------------------------------------------------- runs

function setComposerEnabled(enabled) {
  $("prompt").disabled = !enabled;
  $("send-button").disabled = !enabled;
}

function setRunning(running) {
  $("send-button").hidden = running;
  $("stop-button").hidden = !running;
  $("new-session").disabled = running;
  $("project-select").disabled = running;
  $("llm-select").disabled = running;
  document.body.classList.toggle("running", running);
  if (running) $("stop-button").focus({ preventScroll: true });
}

async function send(text) {
  if (state.run || !state.projectId) return;
  const message = text.trim();
  if (!message) return;
  state.loadToken++; // whatever was loading must not replace this conversation
  clearNotice();
  hideEmpty();
  const box = $("messages");
  box.dataset.follow = "true";
  const question = userBubble(message);
  box.append(question);
  $("prompt").value = "";
  await runTurn((run, signal, adopt) => state.api.chat(state.projectId,
    { message, sessionId: state.sessionId, mode: state.mode, llmConfigId: run.llmConfigId || undefined },
    { signal, onSession: adopt, onMessage: (id) => { question.dataset.messageId = id; } }), (error) => {
    // Refused before the run started: nothing was sent, so the text goes back in the box.
    question.remove();
    if (!box.querySelector(".message")) $("empty-chat").hidden = false;
    $("prompt").value = message;
    reportError(error, "Could not send the message");
  });
}

/**
 * Stream one run into a new assistant turn: `start(run, signal, adopt)` returns
 * its events (chat or confirm); `onRefused(error)` when the server refused it
 * before anything came. Resolves to the run once it has ended.
 */
async function runTurn(start, onRefused) {
  const box = $("messages");
  box.dataset.follow = "true";
  const turn = new Turn();
  turn.node.dataset.status = "running";
  box.append(turn.node);
  scrollDown(true);

  const controller = new AbortController();
  const run = { controller, sessionId: state.sessionId, turn, stopped: false, status: null, received: 0,
    confirmCard: null, llmConfigId: state.llmConfigId, llmChosen: !state.sessionId && state.llmChosen };
  state.run = run;
  setRunning(true);
  const adopt = (sessionId) => {
    if (run.sessionId === sessionId) return;
    run.sessionId = sessionId;
    if (run.llmChosen) rememberLlm(sessionId, run.llmConfigId);
    if (state.run === run) {
      state.sessionId = sessionId;
      updateUrl();
      loadSessions(); // a new conversation is listed while it is answered
    }
  };
  try {
    for await (const event of start(run, controller.signal, adopt)) {
      run.received += 1;
      handleEvent(run, event);
      if (event.type === "done") break;
    }
    if (!run.status) {
      run.status = run.stopped ? "aborted" : "error";
      if (!run.stopped) turn.note("error", "The connection to the server ended before the answer was complete.");
    }
  } catch (error) {
    if (run.stopped || error?.name === "AbortError") {
      run.status = "aborted";
      turn.note("info", "Stopped.");
    } else if (run.received > 0) {
      run.status = "error"; // the stream broke off: keep what came
      turn.note("error", "The connection to the server was lost before the answer was complete.");
    } else {
      run.status = "error";
      run.refused = true;
      turn.node.remove();
      onRefused(error);
    }
  } finally {
    state.run = null;
    setRunning(false);
    if (run.sessionId && run.sessionId !== state.sessionId) {
      // A run whose id arrived only at the end.
      if (run.llmChosen) rememberLlm(run.sessionId, run.llmConfigId);
      state.sessionId = run.sessionId;
      updateUrl();
    }
    await loadSessions();
    // Back to the message box, unless the user went elsewhere meanwhile (the list, the settings).
    const here = document.activeElement;
    const moved = here && here !== document.body && !$("composer").contains(here) && !$("messages").contains(here);
    if (!focusConfirmCard() && !moved) $("prompt").focus();
    // Last: the turn shows its end once the list and the focus are settled, so that
    // nothing of this turn moves the focus after the user has seen it end.
    turn.finish(run.status || "error");
  }
  return run;
}

// ---------------------------------------------------------------- approvals

/**
 * Add the approve/reject card for `calls` to `turn`; its buttons resume the session's run.
 * `approvalId` (from the confirm event) goes back with the decision, so that it applies to
 * exactly the request shown here and to nothing the model asks for later.
 */
function showConfirmCard(turn, calls, sessionId, approvalId) {
  turn.flush();
  turn.segment = null;
  for (const call of calls) {
    const card = turn.cards.get(call.tool_call_id);
    if (card) updateToolCard(card, { status: "waiting" });
  }
  const card = confirmCard(calls);
  card.dataset.sessionId = sessionId || "";
  if (approvalId) card.dataset.approvalId = approvalId;
  turn.node.append(card);
  const buttons = [...card.querySelectorAll(".confirm-actions button")];
  const decide = async (approved) => {
    if (state.run || !state.projectId) return;
    const session = card.dataset.sessionId || state.sessionId;
    if (!session) return;
    for (const button of buttons) button.disabled = true;
    card.dataset.state = "deciding";
    clearNotice();
    state.loadToken++; // whatever was loading must not replace this conversation
    const run = await runTurn((r, signal, adopt) => state.api.confirm(state.projectId, session,
      { approved, mode: state.mode, llmConfigId: r.llmConfigId || undefined, approvalId: card.dataset.approvalId },
      { signal, onSession: adopt }), (error) => {
      if (error instanceof ApiError && (error.code === "no_pending_confirmation" || error.code === "approval_not_pending")) {
        decided(card, null);
      } else {
        card.dataset.state = "waiting";
        for (const button of buttons) button.disabled = false;
      }
      reportError(error, approved ? "Could not approve the configuration" : "Could not reject the configuration");
    });
    if (!run.refused) decided(card, approved);
    if (!focusConfirmCard()) $("prompt").focus();
  };
  buttons[0].addEventListener("click", () => decide(true));
  buttons[1].addEventListener("click", () => decide(false));
  scrollDown();
  return card;
}

/** The card is answered: no buttons any more, the decision in words (null: decided elsewhere). */
function decided(card, approved) {
  card.querySelector(".confirm-actions")?.remove();
  card.dataset.state = approved === null ? "gone" : approved ? "approved" : "rejected";
  const result = card.querySelector(".confirm-result");
  result.textContent = approved === null ? "No longer waiting for an approval."
    : approved ? "Approved: the device's answer is in the tool card below." : "Rejected: nothing was sent.";
  result.hidden = false;
  const turnNode = card.closest(".message-assistant");
  for (const toolCard of turnNode ? turnNode.querySelectorAll('.tool-card[data-status="waiting"]') : []) {
    updateToolCard(toolCard, { status: approved === null ? "aborted" : approved ? "approved" : "rejected" });
  }
}

/** Focus the card still waiting for a decision, if there is one; says whether there was. */
function focusConfirmCard() {
  const cards = $("messages").querySelectorAll('.confirm-card[data-state="waiting"]');
  const card = cards[cards.length - 1];
  if (!card) return false;
  card.focus({ preventScroll: true });
  card.scrollIntoView({ block: "nearest" });
  return true;
}

function handleEvent(run, event) {
  const turn = run.turn;
  switch (event.type) {
    case "content":
      if (typeof event.content === "string") turn.appendText(event.content);
      break;
    case "tool_call":
      turn.card(event);
      break;
    case "tool_start":
      updateToolCard(turn.card(event), { status: "running", args: event.args });
      break;
    case "tool_end":
      updateToolCard(turn.card(event), { status: event.status || "success", output: event.output ?? "" });
      break;
    case "context":
      showReport(event.report);
      break;
    case "error":
      turn.note("error", event.message || "The copilot run failed.");
      if (event.code === "llm_not_configured") {
        notify("warn", "No LLM is configured yet. Add one in the LLM settings to start chatting.", settingsAction);
      } else if (event.code === "session_busy") {
        reportError(new ApiError(409, event), "");
      }
      break;
    case "confirm":
      if (Array.isArray(event.calls) && event.calls.length) {
        run.confirmCard = showConfirmCard(turn, event.calls, run.sessionId, event.approval_id);
      }
      break;
    case "abort":
      run.stopped = true;
      turn.note("info", "Stopped.");
      break;
    case "done":
      run.status = event.status || "completed";
      if (event.session_id) run.sessionId = event.session_id;
      break;
    default:
      break; // heartbeat and anything newer
  }
}

async function abortRemote(sessionId) {
  if (!sessionId || !state.projectId) return false;
  try {
    await state.api.abort(state.projectId, sessionId);
    clearNotice();
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 409) {
      clearNotice(); // nothing running any more
      return true;
    }
    return false;
  }
}

async function stopRun() {
  const run = state.run;
  if (!run || run.stopped) return;
  run.stopped = true;
  $("stop-button").disabled = true;
  try {
    // The server's abort keeps the stream open to deliver "abort" and "done";
    // without a session id yet (or if it fails), closing the stream cancels the run.
    const aborted = await abortRemote(run.sessionId);
    if (!aborted) run.controller.abort();
  } finally {
    $("stop-button").disabled = false;
  }
}

// ---------------------------------------------------------------- LLM check

/** `data`: the answer of GET llm-configs (null when it failed: the check is a courtesy,
 *  sending a message reports the same problem). */
function checkLlmConfigured(data) {
  if (!data) return;
  const configs = Array.isArray(data) ? data : data.configs || [];
  const serverDefault = !Array.isArray(data) && (data.server_default || data.has_server_default);
  if (!configs.length && !serverDefault) {
    notify("warn", "No LLM is configured yet. Add one in the LLM settings to start chatting.", settingsAction);
  }
}

// ---------------------------------------------------------------- each conversation's LLM
//
// The picker by the composer lists the user's LLM configs; the one chosen goes with
// every message, approval and meter request of the conversation. A choice the user
// makes is remembered per session in localStorage; otherwise a conversation uses the
// user's default (so it follows a change of default).

const llmKey = (sessionId) => `gns3-copilot.llm-config.${sessionId}`;

function rememberLlm(sessionId, configId) {
  if (sessionId) localStorage.setItem(llmKey(sessionId), configId);
}

/** Fetch the user's configs and list them in the picker; resolves to the answer (null on failure). */
async function loadLlmConfigs() {
  let data;
  try {
    data = await state.api.llmConfigs();
  } catch {
    return null;
  }
  const configs = (Array.isArray(data) ? data : data.configs || []).filter((c) => c && c.config_id);
  const serverDefault = Array.isArray(data) ? null : data.server_default || null;
  const named = Array.isArray(data) ? null : data.default_config_id;
  const defaultId = configs.find((c) => c.config_id === named)?.config_id
    || configs.find((c) => c.is_default)?.config_id || "";
  const choices = configs.map((c) => ({
    value: c.config_id,
    label: c.config_id === defaultId ? `${c.name || "Unnamed"} (default)` : c.name || "Unnamed",
  }));
  if (!defaultId && serverDefault && configs.length) {
    // No default of the user's own: a chat naming no config uses the server's.
    choices.unshift({ value: "", label: `Server's ${serverDefault.model || "model"} (default)` });
  }
  state.llm = { configs, defaultId, serverDefault, choices };
  renderLlmPicker();
  resolveLlmChoice();
  return data;
}

function renderLlmPicker() {
  const select = $("llm-select");
  select.replaceChildren();
  for (const choice of state.llm.choices) {
    const option = el("option", null, choice.label);
    option.value = choice.value;
    select.append(option);
  }
  $("llm-picker").hidden = state.llm.choices.length < 2; // nothing to choose between
}

/** What a conversation starts on: the user's default, else the server's (none named), else the first. */
function defaultLlmChoice() {
  const { choices, defaultId } = state.llm;
  if (defaultId) return defaultId;
  return choices.length ? choices[0].value : "";
}

/** Show the current conversation's LLM: the user's choice while its config exists, else the default. */
function resolveLlmChoice() {
  const wanted = state.sessionId ? localStorage.getItem(llmKey(state.sessionId))
    : state.llmChosen ? state.llmConfigId : null;
  const known = wanted !== null && state.llm.choices.some((c) => c.value === wanted);
  state.llmConfigId = known ? wanted : defaultLlmChoice();
  $("llm-select").value = state.llmConfigId;
}

function onLlmChange(event) {
  state.llmConfigId = event.target.value;
  if (state.sessionId) rememberLlm(state.sessionId, state.llmConfigId);
  else state.llmChosen = true; // remembered when the conversation gets its id
  if (state.projectId && state.sessionId && !state.run) refreshMeter(state.sessionId, state.loadToken);
}

// ---------------------------------------------------------------- layout and keys

const smallScreen = window.matchMedia("(max-width: 760px)");

function setSidebar(open) {
  document.body.classList.toggle("sidebar-open", open);
  $("sessions-toggle").setAttribute("aria-expanded", String(open));
  if (open) ($("session-list").querySelector(".current .session-open") || $("new-session")).focus();
}

function closeSidebarOnSmallScreens() {
  if (smallScreen.matches) setSidebar(false);
}

function onKeyDown(event) {
  if (document.querySelector("dialog[open]")) return; // dialogs handle their own keys
  if ($("main-view").hidden) return;
  if (event.key === "Escape") {
    if (state.run) {
      event.preventDefault();
      stopRun();
    } else if (document.body.classList.contains("sidebar-open") && smallScreen.matches) {
      setSidebar(false);
      $("sessions-toggle").focus();
    }
    return;
  }
  if (event.altKey && !event.ctrlKey && !event.metaKey) {
    const key = event.key.toLowerCase();
    if (key === "n") {
      event.preventDefault();
      newSession();
    } else if (key === "s") {
      event.preventDefault();
      openSettings();
    } else if (key === "l") {
      event.preventDefault();
      if (smallScreen.matches) setSidebar(!document.body.classList.contains("sidebar-open"));
      else ($("session-list").querySelector(".current .session-open") || $("new-session")).focus();
    }
  }
}

function wire() {
  $("login-form").addEventListener("submit", onLogin);
  $("logout-button").addEventListener("click", onLogout);
  $("project-select").addEventListener("change", (event) => selectProject(event.target.value));
  $("llm-select").addEventListener("change", onLlmChange);
  $("mode-select").addEventListener("change", (event) => {
    state.mode = event.target.value;
    localStorage.setItem("gns3-copilot.mode", state.mode);
  });
  $("new-session").addEventListener("click", newSession);
  $("sessions-toggle").addEventListener("click", () => setSidebar(!document.body.classList.contains("sidebar-open")));
  $("stop-button").addEventListener("click", stopRun);
  $("notice-close").addEventListener("click", clearNotice);
  $("notice-action").addEventListener("click", () => noticeAction?.());
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send($("prompt").value);
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send($("prompt").value);
    }
  });
  const messages = $("messages");
  messages.addEventListener("scroll", () => {
    messages.dataset.follow = nearBottom(messages) ? "true" : "false";
  });
  document.addEventListener("keydown", onKeyDown);
  initSettings({
    api: () => state.api,
    onChange: async () => {
      await loadLlmConfigs(); // a config saved or deleted: the picker lists what is there now
      if (state.projectId && state.sessionId && !state.run) refreshMeter(state.sessionId, state.loadToken);
      if ($("notice").dataset.code === "llm_not_configured") clearNotice();
    },
    onError: reportError,
  });
  initMcpSettings({ api: () => state.api });
}

wire();
boot().catch(() => {
  show("login");
  $("login-error").textContent = "The GNS3 server could not be reached.";
  $("login-error").hidden = false;
});
