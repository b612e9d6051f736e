// Each conversation's LLM. The picker by the composer lists the user's LLM configs; the
// one chosen goes with every message, approval and meter request of the conversation. A
// choice the user makes is remembered per session in localStorage; otherwise a
// conversation uses the user's default (so it follows a change of default).

import { refreshMeter } from "./meter.js";
import { notify, settingsAction } from "./notice.js";
import { el } from "./render.js";
import { $, state } from "./state.js";

const llmKey = (sessionId) => `gns3-copilot.llm-config.${sessionId}`;

export function rememberLlm(sessionId, configId) {
  if (sessionId) localStorage.setItem(llmKey(sessionId), configId);
}

/** A deleted conversation's choice is dropped with it. */
export function forgetLlm(sessionId) {
  localStorage.removeItem(llmKey(sessionId));
}

/** Fetch the user's configs and list them in the picker; resolves to the answer (null on failure). */
export async function loadLlmConfigs() {
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
export function resolveLlmChoice() {
  const wanted = state.sessionId ? localStorage.getItem(llmKey(state.sessionId))
    : state.llmChosen ? state.llmConfigId : null;
  const known = wanted !== null && state.llm.choices.some((c) => c.value === wanted);
  state.llmConfigId = known ? wanted : defaultLlmChoice();
  $("llm-select").value = state.llmConfigId;
}

export function onLlmChange(event) {
  state.llmConfigId = event.target.value;
  if (state.sessionId) rememberLlm(state.sessionId, state.llmConfigId);
  else state.llmChosen = true; // remembered when the conversation gets its id
  if (state.projectId && state.sessionId && !state.run) refreshMeter(state.sessionId, state.loadToken);
}

/** `data`: the answer of GET llm-configs (null when it failed: the check is a courtesy,
 *  sending a message reports the same problem). */
export function checkLlmConfigured(data) {
  if (!data) return;
  const configs = Array.isArray(data) ? data : data.configs || [];
  const serverDefault = !Array.isArray(data) && (data.server_default || data.has_server_default);
  if (!configs.length && !serverDefault) {
    notify("warn", "No LLM is configured yet. Add one in the LLM settings to start chatting.", settingsAction);
  }
}
