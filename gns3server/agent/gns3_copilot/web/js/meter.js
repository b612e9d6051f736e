// The context meter: the budget report of the last model call (or, when a conversation
// is opened, of the next one, computed without calling the LLM), and the marker where
// earlier conversation was summarised for the model.

import { describeReport } from "./render.js";
import { $, state } from "./state.js";

export function resetMeter() {
  const meter = $("meter");
  meter.dataset.state = "empty";
  meter.dataset.total = "";
  meter.dataset.percent = "";
  $("meter-text").textContent = "no model call yet";
  $("meter-bar").style.width = "0%";
  $("meter-notes").hidden = true;
  meter.querySelector(".meter-track").setAttribute("aria-valuenow", "0");
}

/** Show a budget report; `preview`: the next call's, not one that was sent. */
export function showReport(report, preview = false) {
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

/** The next call's report for `sessionId`; dropped if the user moved on (`token`) or a run started. */
export async function refreshMeter(sessionId, token) {
  try {
    const report = await state.api.context(state.projectId, sessionId, state.mode, state.llmConfigId || undefined);
    if (token === state.loadToken && !state.run) showReport(report.report || report, true);
  } catch {
    // No LLM configured or the topology is unavailable: the meter waits for the next run.
  }
}
