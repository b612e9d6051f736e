// The project picker: the projects the user may see, and choosing one (its
// conversations listed, the one in the address opened).

import { setComposerEnabled } from "./chat.js";
import { clearConversation } from "./conversation.js";
import { reportError } from "./errors.js";
import { notify } from "./notice.js";
import { el } from "./render.js";
import { loadSessions, openSession, renderSessions } from "./sessions.js";
import { $, state, updateUrl } from "./state.js";

export async function loadProjects() {
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

export async function selectProject(projectId, { keepSession = false } = {}) {
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
