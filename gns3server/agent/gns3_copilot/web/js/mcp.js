// The MCP section of the settings dialog: where MCP clients connect, a button that
// creates an MCP API key (shown once, here, never again), the user's keys with a
// revoke button, and the calls made through MCP that wait for the user's approval.

import { ApiError } from "./api.js";
import { el } from "./render.js";

const $ = (id) => document.getElementById(id);
const BASE = "/v3/copilot/mcp";

let deps = null; // {api: () => Api}

function problem(error) {
  return error instanceof ApiError ? error.message : "The GNS3 server could not be reached.";
}

function status(text, isError = false) {
  const target = $("mcp-status");
  target.textContent = text;
  target.classList.toggle("field-error", isError);
}

function keyRow(key) {
  const state = key.revoked_at ? "revoked" : key.active ? key.scope.replace("_", "-") : "expired";
  const row = el("li", "mcp-key", `${key.name} · ${key.prefix}… · ${state}`);
  row.dataset.keyId = key.key_id;
  if (!key.revoked_at) {
    const revoke = el("button", "danger small", "Revoke");
    revoke.type = "button";
    revoke.addEventListener("click", () => revokeKey(key));
    row.append(" ", revoke);
  }
  return row;
}

function approvalRow(approval) {
  const commands = (approval.arguments.commands || []).join("; ");
  const row = el("li", "mcp-approval",
    `${approval.tool} on ${approval.arguments.device || "?"}: ${commands} (${approval.via}, ${approval.state})`);
  row.dataset.approvalId = approval.approval_id;
  if (approval.state === "pending") {
    for (const [label, approve] of [["Approve", true], ["Reject", false]]) {
      const button = el("button", approve ? "primary small" : "small", label);
      button.type = "button";
      button.addEventListener("click", () => decide(approval, approve));
      row.append(" ", button);
    }
  }
  return row;
}

async function refresh() {
  const api = deps && deps.api();
  if (!api) return;
  try {
    const [info, keys, approvals] = await Promise.all([
      api.request("GET", `${BASE}/info`), api.request("GET", `${BASE}/keys`), api.request("GET", `${BASE}/approvals`),
    ]);
    $("mcp-endpoint").value = new URL(info.endpoint, window.location.origin).href;
    $("mcp-keys").replaceChildren(...keys.map(keyRow));
    $("mcp-keys-empty").hidden = keys.length > 0;
    $("mcp-approvals").replaceChildren(...approvals.map(approvalRow));
    $("mcp-approvals-empty").hidden = approvals.length > 0;
  } catch (error) {
    status(`MCP: ${problem(error)}`, true);
  }
}

async function createKey() {
  const name = $("mcp-key-name").value.trim();
  if (!name) {
    status("Name the key first (e.g. the client it is for).", true);
    $("mcp-key-name").focus();
    return;
  }
  $("mcp-create-key").disabled = true;
  try {
    const created = await deps.api().request("POST", `${BASE}/keys`, { name, scope: $("mcp-key-scope").value });
    $("mcp-new-key").value = created.key;
    $("mcp-new-key-box").hidden = false;
    $("mcp-key-name").value = "";
    status(`Key “${created.name}” created. Copy it now: it is not shown again.`);
    await refresh();
    $("mcp-new-key").select();
  } catch (error) {
    status(problem(error), true);
  } finally {
    $("mcp-create-key").disabled = false;
  }
}

async function revokeKey(key) {
  try {
    await deps.api().request("DELETE", `${BASE}/keys/${encodeURIComponent(key.key_id)}`);
    status(`Key “${key.name}” revoked.`);
  } catch (error) {
    status(problem(error), true);
  }
  await refresh();
}

async function decide(approval, approve) {
  try {
    await deps.api().request("POST", `${BASE}/approvals/${encodeURIComponent(approval.approval_id)}`, { approve });
    status(approve ? "Approved: the MCP client runs it when it calls again." : "Rejected: nothing is sent.");
  } catch (error) {
    status(problem(error), true);
  }
  await refresh();
}

export function initMcpSettings(dependencies) {
  deps = dependencies;
  $("mcp-create-key").addEventListener("click", createKey);
  $("mcp-refresh").addEventListener("click", refresh);
  // Refreshed whenever the settings dialog opens, however it was opened.
  const dialog = $("settings-dialog");
  new MutationObserver(() => {
    if (dialog.open) {
      $("mcp-new-key-box").hidden = true;
      $("mcp-new-key").value = "";
      status("");
      refresh();
    }
  }).observe(dialog, { attributes: true, attributeFilter: ["open"] });
}
