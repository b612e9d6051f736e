// What the panel knows, shared by its modules: the signed-in API, the project and
// conversation shown, the mode, the LLM choice and the run streaming now. One object,
// so that every module sees the same values (a module's own `let` would be a copy).

export const $ = (id) => document.getElementById(id);
export const params = new URLSearchParams(window.location.search);

export const state = {
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

/** Keep the address bar on the project and conversation shown (reload and bookmarks come back here). */
export function updateUrl() {
  const url = new URL(window.location.href);
  if (state.projectId) url.searchParams.set("project_id", state.projectId);
  else url.searchParams.delete("project_id");
  if (state.sessionId) url.searchParams.set("session_id", state.sessionId);
  else url.searchParams.delete("session_id");
  window.history.replaceState(null, "", url);
}
