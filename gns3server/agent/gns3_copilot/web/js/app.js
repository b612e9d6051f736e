// The copilot panel's entry point: sign-in, the keyboard shortcuts, and the wiring
// of the page's controls to the modules that do the work (projects.js, sessions.js,
// chat.js, meter.js, llm.js, settings.js, mcp.js). State lives in `state`
// (state.js); the DOM is updated by functions, never from strings of HTML.

import { Api, ApiError, login } from "./api.js";
import { savedToken, saveToken, signOut, webUiTokens } from "./auth.js";
import { initChat, send } from "./chat.js";
import { nearBottom } from "./conversation.js";
import { reportError } from "./errors.js";
import { checkLlmConfigured, loadLlmConfigs, onLlmChange } from "./llm.js";
import { openLabs } from "./labs.js";
import { initMcpSettings } from "./mcp.js";
import { refreshMeter } from "./meter.js";
import { clearNotice, runNoticeAction } from "./notice.js";
import { loadProjects, selectProject } from "./projects.js";
import { loadSessions, newSession, setSidebar, smallScreen } from "./sessions.js";
import { initSettings, openSettings } from "./settings.js";
import { $, params, state } from "./state.js";
import { stopRun } from "./stop.js";

function show(view) {
  $("boot").hidden = true;
  $("login-view").hidden = view !== "login";
  $("main-view").hidden = view !== "main";
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

// ---------------------------------------------------------------- keys and wiring

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
  initChat({ loadSessions });
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
  $("notice-action").addEventListener("click", runNoticeAction);
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
  $("labs-button").addEventListener("click", openLabs);
  $("labs-close").addEventListener("click", () => $("labs-dialog").close());
}

wire();
boot().catch(() => {
  show("login");
  $("login-error").textContent = "The GNS3 server could not be reached.";
  $("login-error").hidden = false;
});
