// The LLM settings dialog: the user's configs (create, edit, delete, default).
// The server validates every config against its JSON Schema; its 422 names the
// field and the rule, and the message is shown under that field. The API key is
// write-only: the input starts empty and the stored key is only ever shown masked.

import { ApiError } from "./api.js";
import { el } from "./render.js";

const $ = (id) => document.getElementById(id);

const TEXT_FIELDS = ["name", "provider", "model", "base_url", "context_strategy", "tokenizer"];
const NUMBER_FIELDS = ["context_limit", "temperature", "max_tokens", "timeout", "max_retries"];
const FIELDS = [...TEXT_FIELDS, ...NUMBER_FIELDS];
const NEW = "";

let deps = null; // {api: () => Api, onChange(), onError(error, context)}
let list = { configs: [], default_config_id: null, server_default: null };
let current = null; // the config record being edited, or null for a new one

const input = (field) => $(`cfg-${field}`);

function clearErrors() {
  $("settings-error").hidden = true;
  for (const field of [...FIELDS, "api_key"]) {
    const error = $(`err-${field}`);
    error.hidden = true;
    error.textContent = "";
    input(field).removeAttribute("aria-invalid");
    input(field).removeAttribute("aria-describedby");
  }
}

function status(text) {
  $("settings-status").textContent = text;
}

function showErrors(error) {
  let first = null;
  const general = [];
  const problems = error.errors.length ? error.errors : [{ field: error.field, message: error.message }];
  for (const problem of problems) {
    const field = problem.field;
    const target = field ? $(`err-${field}`) : null;
    if (target) {
      target.textContent = problem.message || error.message;
      target.hidden = false;
      input(field).setAttribute("aria-invalid", "true");
      input(field).setAttribute("aria-describedby", target.id);
      first = first || input(field);
    } else {
      general.push(field ? `${field}: ${problem.message}` : problem.message || error.message);
    }
  }
  if (general.length) {
    $("settings-error").textContent = general.join(" ");
    $("settings-error").hidden = false;
  }
  (first || $("settings-error")).focus?.();
}

function fill(record) {
  current = record;
  clearErrors();
  const config = record ? record.config : { provider: "openai" };
  for (const field of FIELDS) {
    const value = config[field];
    input(field).value = value === undefined || value === null ? "" : String(value);
  }
  const key = input("api_key");
  key.value = "";
  if (record && record.has_api_key) {
    key.placeholder = `stored: ${config.api_key || "••••"} — type to replace`;
  } else {
    key.placeholder = record ? "none stored" : "optional for local servers";
  }
  $("cfg-clear-key").checked = false;
  $("cfg-clear-key").closest("label").hidden = !(record && record.has_api_key);
  $("cfg-default").checked = record ? record.is_default : list.configs.length === 0;
  $("settings-delete").hidden = !record;
  $("settings-save").textContent = record ? "Save" : "Add";
}

function renderPicker(selectId) {
  const select = $("config-select");
  select.replaceChildren();
  for (const record of list.configs) {
    const option = el("option", null, record.is_default ? `${record.name} (default)` : record.name);
    option.value = record.config_id;
    select.append(option);
  }
  const fresh = el("option", null, "New configuration…");
  fresh.value = NEW;
  select.append(fresh);
  select.value = selectId ?? NEW;
  fill(list.configs.find((r) => r.config_id === select.value) || null);
  if (!list.configs.length) {
    status(list.server_default
      ? `You have no configuration of your own: the server's default (${list.server_default.model || "model"}) is used.`
      : "No LLM is configured yet: add one to start chatting.");
  } else {
    status("");
  }
}

async function reload(selectId) {
  try {
    list = await deps.api().llmConfigs();
  } catch (error) {
    deps.onError(error, "Could not load the LLM settings");
    return false;
  }
  const wanted = selectId !== undefined ? selectId : list.default_config_id || list.configs[0]?.config_id || NEW;
  renderPicker(wanted);
  return true;
}

export async function openSettings() {
  const dialog = $("settings-dialog");
  if (!deps || !deps.api()) return;
  if (!dialog.open) dialog.showModal();
  status("Loading…");
  if (await reload()) input(current ? "model" : "name").focus();
}

function closeSettings() {
  $("settings-dialog").close();
}

/** The value typed in a field, as the schema wants it (numbers as numbers). */
function valueOf(field) {
  const raw = input(field).value.trim();
  if (raw === "") return null;
  if (NUMBER_FIELDS.includes(field)) {
    const number = Number(raw);
    return Number.isFinite(number) ? number : raw; // a non-number goes to the server, which says why
  }
  return raw;
}

function collect() {
  const values = {};
  for (const field of FIELDS) values[field] = valueOf(field);
  if (!current) {
    const config = {};
    for (const [field, value] of Object.entries(values)) if (value !== null) config[field] = value;
    const key = input("api_key").value;
    if (key) config.api_key = key;
    return config;
  }
  const changes = {};
  for (const [field, value] of Object.entries(values)) {
    const before = current.config[field];
    const had = before !== undefined && before !== null && before !== "";
    if (value === null) {
      if (had) changes[field] = null;
    } else if (!had || String(before) !== String(value)) {
      changes[field] = value;
    }
  }
  const key = input("api_key").value;
  if (key) changes.api_key = key;
  else if ($("cfg-clear-key").checked) changes.api_key = null;
  return changes;
}

async function save(event) {
  event.preventDefault();
  clearErrors();
  const api = deps.api();
  const makeDefault = $("cfg-default").checked;
  $("settings-save").disabled = true;
  try {
    let record;
    if (!current) {
      record = await api.createLlmConfig(collect(), makeDefault);
    } else {
      const changes = collect();
      record = Object.keys(changes).length ? await api.updateLlmConfig(current.config_id, changes) : current;
      if (makeDefault && !record.is_default) record = await api.setDefaultLlmConfig(record.config_id);
      else if (!makeDefault && record.is_default) await api.clearDefaultLlmConfig();
    }
    input("api_key").value = "";
    await reload(record.config_id);
    status(`Saved “${record.name}”.`);
    deps.onChange();
  } catch (error) {
    if (error instanceof ApiError && error.status === 422) {
      status("");
      showErrors(error);
    } else if (error instanceof ApiError) {
      $("settings-error").textContent = error.message;
      $("settings-error").hidden = false;
    } else {
      $("settings-error").textContent = "The GNS3 server could not be reached.";
      $("settings-error").hidden = false;
    }
  } finally {
    $("settings-save").disabled = false;
  }
}

async function remove() {
  if (!current) return;
  const name = current.name;
  try {
    await deps.api().deleteLlmConfig(current.config_id);
  } catch (error) {
    $("settings-error").textContent = error instanceof ApiError ? error.message : "The GNS3 server could not be reached.";
    $("settings-error").hidden = false;
    return;
  }
  await reload();
  status(`Deleted “${name}”.`);
  deps.onChange();
  $("config-select").focus();
}

export function initSettings(dependencies) {
  deps = dependencies;
  $("settings-button").addEventListener("click", openSettings);
  $("settings-close").addEventListener("click", closeSettings);
  $("settings-cancel").addEventListener("click", closeSettings);
  $("settings-form").addEventListener("submit", save);
  $("settings-delete").addEventListener("click", remove);
  $("config-select").addEventListener("change", (event) => {
    status("");
    fill(list.configs.find((r) => r.config_id === event.target.value) || null);
  });
  $("cfg-clear-key").addEventListener("change", (event) => {
    if (event.target.checked) input("api_key").value = "";
  });
}
