// The project's conversations: the list (the sidebar, a drawer on narrow screens),
// opening one (its history, a pending approval, the next call's meter), new, rename
// and delete.

import { showConfirmCard } from "./chat.js";
import { Turn, clearConversation, focusConfirmCard, renderHistory, scrollDown } from "./conversation.js";
import { reportError } from "./errors.js";
import { forgetLlm, resolveLlmChoice } from "./llm.js";
import { refreshMeter } from "./meter.js";
import { clearNotice, notify } from "./notice.js";
import { el } from "./render.js";
import { $, state, updateUrl } from "./state.js";

export const smallScreen = window.matchMedia("(max-width: 760px)");

export function setSidebar(open) {
  document.body.classList.toggle("sidebar-open", open);
  $("sessions-toggle").setAttribute("aria-expanded", String(open));
  if (open) ($("session-list").querySelector(".current .session-open") || $("new-session")).focus();
}

function closeSidebarOnSmallScreens() {
  if (smallScreen.matches) setSidebar(false);
}

export async function loadSessions() {
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

export function renderSessions() {
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

export function newSession() {
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
  forgetLlm(session.session_id);
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

/** Show a conversation: its history, the approval it waits for, the next call's meter. */
export async function openSession(sessionId, token = ++state.loadToken) {
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
