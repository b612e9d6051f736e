// The notice above the conversation: one message at a time, with at most one action
// button (open the settings, stop a busy run, show the approval card).

import { $ } from "./state.js";
import { openSettings } from "./settings.js";

let noticeAction = null;

/** Show the notice: kind is "error", "warn" or "info"; `action`: {label, code, run} or none. */
export function notify(kind, text, action) {
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

export function clearNotice() {
  $("notice").hidden = true;
}

/** The notice's button was pressed: run the action it offers. */
export function runNoticeAction() {
  noticeAction?.();
}

export const settingsAction = { label: "Open LLM settings", code: "llm_not_configured", run: () => openSettings() };
