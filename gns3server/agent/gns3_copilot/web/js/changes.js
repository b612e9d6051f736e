// A configuration change's result, readable: per device the configuration diff (lines
// added and removed), the state that differs, each check with its verdict and the value
// read, and when a check failed a "Roll back" button (the POST is the approval).
// Everything from the device is text (el()): never markup.

import { el } from "./render.js";
import { state } from "./state.js";

const VERDICT = { pass: "✓ pass", fail: "✗ fail", unknown: "? unknown" };

/** The `change` object of a gns3_config_commands result (its output, JSON text or parsed), or null. */
export function changeOf(output) {
  let value = output;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return null;
    }
  }
  const change = value && typeof value === "object" ? value.change : null;
  return change && typeof change === "object" && typeof change.change_id === "string"
    ? { change, device: typeof value.device === "string" ? value.device : "" } : null;
}

const show = (value) => (value === null || value === undefined ? "—" : typeof value === "string" ? value
  : JSON.stringify(value));

function configDiff(lines) {
  const pre = el("pre", "change-config");
  for (const line of lines) {
    const text = String(line);
    const kind = text.startsWith("+++") || text.startsWith("---") || text.startsWith("@@") ? "meta"
      : text.startsWith("+") ? "added" : text.startsWith("-") ? "removed" : "context";
    const row = el("span", `diff-line diff-${kind}`, `${text}\n`);
    row.dataset.kind = kind;
    pre.append(row);
  }
  return pre;
}

function stateDiff(rows) {
  const list = el("ul", "change-state");
  for (const row of rows) {
    const item = el("li", "change-fact", row.note ? `${row.aspect}: ${row.note}`
      : `${row.aspect} ${row.item}: ${show(row.before)} → ${show(row.after)}`);
    list.append(item);
  }
  return list;
}

/** The checks of a report (`{passed, summary, checks: [{subject, status, expected, observed}]}`). */
export function checksList(report) {
  const list = el("ul", "change-checks");
  for (const check of Array.isArray(report?.checks) ? report.checks : []) {
    const status = Object.hasOwn(VERDICT, check.status) ? check.status : "unknown";
    const item = el("li", "change-check");
    item.dataset.status = status;
    item.append(el("span", "check-verdict", VERDICT[status]), el("span", "check-subject", ` ${show(check.subject)}`),
      el("span", "check-observed muted", ` read: ${show(check.observed)} (expected ${show(check.expected)})`));
    list.append(item);
  }
  return list;
}

async function rollBack(view, change, button) {
  const result = view.querySelector(".change-rollback-result");
  button.disabled = true;
  result.hidden = false;
  result.textContent = "Rolling back…";
  try {
    const done = await state.api.rollback(state.projectId, change.change_id);
    const passed = done.verify ? done.verify.passed : null;
    result.textContent = `Rolled back (${(done.commands || []).join("; ")}): `
      + (passed === true ? "its checks pass again." : passed === false ? "a check still fails." : "not verified.");
    view.dataset.rolledBack = "true";
    if (done.verify) result.after(checksList(done.verify));
    button.remove();
  } catch (error) {
    result.textContent = `Not rolled back: ${error.message || error}`;
    button.disabled = false;
  }
}

/** The readable view of one change (`device`: whose change, for the heading). */
export function changeView(change, device) {
  const view = el("div", "change-view");
  view.dataset.changeId = change.change_id;
  view.dataset.verified = String(change.verified || "none");
  view.append(el("h4", "change-heading", `Change on ${device || "the device"}: `
    + ({ pass: "verified", fail: "a check failed", none: "not verified" }[change.verified] || "not verified")));
  const diff = change.diff || {};
  if (Array.isArray(diff.config)) {
    view.append(el("h5", "change-sub", "Configuration"),
      diff.config.length ? configDiff(diff.config) : el("p", "muted", "No configuration line changed."));
  }
  if (Array.isArray(diff.state)) {
    view.append(el("h5", "change-sub", "State"),
      diff.state.length ? stateDiff(diff.state) : el("p", "muted", "No state changed."));
  }
  if (change.checks) {
    view.append(el("h5", "change-sub", "Checks"), checksList(change.checks));
    if (!change.checks.checks?.length && change.checks.summary) view.append(el("p", "muted", change.checks.summary));
  }
  if (change.note) view.append(el("p", "small muted", change.note));
  const commands = change.rollback?.commands;
  if (change.verified === "fail" && Array.isArray(commands) && commands.length) {
    const actions = el("div", "change-actions");
    const button = el("button", "danger change-rollback", "Roll back");
    button.type = "button";
    button.title = commands.join("\n");
    actions.append(button, el("pre", "change-rollback-commands", commands.join("\n")));
    const result = el("p", "change-rollback-result small");
    result.hidden = true;
    view.append(actions, result);
    button.addEventListener("click", () => rollBack(view, change, button));
  }
  return view;
}

/**
 * Show a tool result's change, if it has one: in the approval card's entry for that call
 * when the card is on the page (its result), else in the tool card.
 */
export function showChange(toolCard, output) {
  const found = changeOf(output);
  if (!found) return;
  const id = toolCard.dataset.toolCallId;
  const entry = id ? [...document.querySelectorAll(".confirm-call")].find((n) => n.dataset.toolCallId === id) : null;
  const host = entry || toolCard.querySelector(".tool-body");
  host.querySelector(`.change-view`)?.remove();
  host.append(changeView(found.change, found.device));
}
