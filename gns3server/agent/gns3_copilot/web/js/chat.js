// A chat turn: a message (or an approval decision) sent, its event stream drawn into a
// new assistant turn as it comes (text, tool cards, the context report, errors, the
// approval card), and the panel put back once the run has ended.

import { ApiError } from "./api.js";
import { showChange } from "./changes.js";
import { Turn, focusConfirmCard, hideEmpty, scrollDown, userBubble } from "./conversation.js";
import { reportError } from "./errors.js";
import { rememberLlm } from "./llm.js";
import { showReport } from "./meter.js";
import { clearNotice, notify, settingsAction } from "./notice.js";
import { confirmCard, updateToolCard } from "./render.js";
import { $, state, updateUrl } from "./state.js";

// The session list lives above this module (it opens conversations, which may show an
// approval card from here): it is handed in rather than imported.
let deps = null; // {loadSessions(): Promise}

export function initChat(dependencies) {
  deps = dependencies;
}

export function setComposerEnabled(enabled) {
  $("prompt").disabled = !enabled;
  $("send-button").disabled = !enabled;
}

function setRunning(running) {
  $("send-button").hidden = running;
  $("stop-button").hidden = !running;
  $("new-session").disabled = running;
  $("project-select").disabled = running;
  $("llm-select").disabled = running;
  document.body.classList.toggle("running", running);
  if (running) $("stop-button").focus({ preventScroll: true });
}

export async function send(text) {
  if (state.run || !state.projectId) return;
  const message = text.trim();
  if (!message) return;
  state.loadToken++; // whatever was loading must not replace this conversation
  clearNotice();
  hideEmpty();
  const box = $("messages");
  box.dataset.follow = "true";
  const question = userBubble(message);
  box.append(question);
  $("prompt").value = "";
  await runTurn((run, signal, adopt) => state.api.chat(state.projectId,
    { message, sessionId: state.sessionId, mode: state.mode, llmConfigId: run.llmConfigId || undefined },
    { signal, onSession: adopt, onMessage: (id) => { question.dataset.messageId = id; } }), (error) => {
    // Refused before the run started: nothing was sent, so the text goes back in the box.
    question.remove();
    if (!box.querySelector(".message")) $("empty-chat").hidden = false;
    $("prompt").value = message;
    reportError(error, "Could not send the message");
  });
}

/**
 * Stream one run into a new assistant turn: `start(run, signal, adopt)` returns
 * its events (chat or confirm); `onRefused(error)` when the server refused it
 * before anything came. Resolves to the run once it has ended.
 */
async function runTurn(start, onRefused) {
  const box = $("messages");
  box.dataset.follow = "true";
  const turn = new Turn();
  turn.node.dataset.status = "running";
  box.append(turn.node);
  scrollDown(true);

  const controller = new AbortController();
  const run = { controller, sessionId: state.sessionId, turn, stopped: false, status: null, received: 0,
    confirmCard: null, llmConfigId: state.llmConfigId, llmChosen: !state.sessionId && state.llmChosen };
  state.run = run;
  setRunning(true);
  const adopt = (sessionId) => {
    if (run.sessionId === sessionId) return;
    run.sessionId = sessionId;
    if (run.llmChosen) rememberLlm(sessionId, run.llmConfigId);
    if (state.run === run) {
      state.sessionId = sessionId;
      updateUrl();
      deps.loadSessions(); // a new conversation is listed while it is answered
    }
  };
  try {
    for await (const event of start(run, controller.signal, adopt)) {
      run.received += 1;
      handleEvent(run, event);
      if (event.type === "done") break;
    }
    if (!run.status) {
      run.status = run.stopped ? "aborted" : "error";
      if (!run.stopped) turn.note("error", "The connection to the server ended before the answer was complete.");
    }
  } catch (error) {
    if (run.stopped || error?.name === "AbortError") {
      run.status = "aborted";
      turn.note("info", "Stopped.");
    } else if (run.received > 0) {
      run.status = "error"; // the stream broke off: keep what came
      turn.note("error", "The connection to the server was lost before the answer was complete.");
    } else {
      run.status = "error";
      run.refused = true;
      turn.node.remove();
      onRefused(error);
    }
  } finally {
    state.run = null;
    setRunning(false);
    if (run.sessionId && run.sessionId !== state.sessionId) {
      // A run whose id arrived only at the end.
      if (run.llmChosen) rememberLlm(run.sessionId, run.llmConfigId);
      state.sessionId = run.sessionId;
      updateUrl();
    }
    await deps.loadSessions();
    // Back to the message box, unless the user went elsewhere meanwhile (the list, the settings).
    const here = document.activeElement;
    const moved = here && here !== document.body && !$("composer").contains(here) && !$("messages").contains(here);
    if (!focusConfirmCard() && !moved) $("prompt").focus();
    // Last: the turn shows its end once the list and the focus are settled, so that
    // nothing of this turn moves the focus after the user has seen it end.
    turn.finish(run.status || "error");
  }
  return run;
}

function handleEvent(run, event) {
  const turn = run.turn;
  switch (event.type) {
    case "content":
      if (typeof event.content === "string") turn.appendText(event.content);
      break;
    case "tool_call":
      turn.card(event);
      break;
    case "tool_start":
      updateToolCard(turn.card(event), { status: "running", args: event.args });
      break;
    case "tool_end": {
      const card = turn.card(event);
      updateToolCard(card, { status: event.status || "success", output: event.output ?? "" });
      showChange(card, event.output);
      break;
    }
    case "context":
      showReport(event.report);
      break;
    case "evidence":
      turn.showEvidence(event, (id) => state.api.evidence(state.projectId, run.sessionId || state.sessionId, id));
      break;
    case "error":
      turn.note("error", event.message || "The copilot run failed.");
      if (event.code === "llm_not_configured") {
        notify("warn", "No LLM is configured yet. Add one in the LLM settings to start chatting.", settingsAction);
      } else if (event.code === "session_busy") {
        reportError(new ApiError(409, event), "");
      }
      break;
    case "confirm":
      if (Array.isArray(event.calls) && event.calls.length) {
        run.confirmCard = showConfirmCard(turn, event.calls, run.sessionId, event.approval_id);
      }
      break;
    case "abort":
      run.stopped = true;
      turn.note("info", "Stopped.");
      break;
    case "done":
      run.status = event.status || "completed";
      if (event.session_id) run.sessionId = event.session_id;
      break;
    default:
      break; // heartbeat and anything newer
  }
}

// ---------------------------------------------------------------- approvals

/**
 * Add the approve/reject card for `calls` to `turn`; its buttons resume the session's run.
 * `approvalId` (from the confirm event) goes back with the decision, so that it applies to
 * exactly the request shown here and to nothing the model asks for later.
 */
export function showConfirmCard(turn, calls, sessionId, approvalId) {
  turn.flush();
  turn.segment = null;
  for (const call of calls) {
    const card = turn.cards.get(call.tool_call_id);
    if (card) updateToolCard(card, { status: "waiting" });
  }
  const card = confirmCard(calls);
  card.dataset.sessionId = sessionId || "";
  if (approvalId) card.dataset.approvalId = approvalId;
  turn.node.append(card);
  const buttons = [...card.querySelectorAll(".confirm-actions button")];
  const decide = async (approved) => {
    if (state.run || !state.projectId) return;
    const session = card.dataset.sessionId || state.sessionId;
    if (!session) return;
    for (const button of buttons) button.disabled = true;
    card.dataset.state = "deciding";
    clearNotice();
    state.loadToken++; // whatever was loading must not replace this conversation
    const run = await runTurn((r, signal, adopt) => state.api.confirm(state.projectId, session,
      { approved, mode: state.mode, llmConfigId: r.llmConfigId || undefined, approvalId: card.dataset.approvalId },
      { signal, onSession: adopt }), (error) => {
      if (error instanceof ApiError && (error.code === "no_pending_confirmation" || error.code === "approval_not_pending")) {
        decided(card, null);
      } else {
        card.dataset.state = "waiting";
        for (const button of buttons) button.disabled = false;
      }
      reportError(error, approved ? "Could not approve the configuration" : "Could not reject the configuration");
    });
    if (!run.refused) decided(card, approved);
    if (!focusConfirmCard()) $("prompt").focus();
  };
  buttons[0].addEventListener("click", () => decide(true));
  buttons[1].addEventListener("click", () => decide(false));
  scrollDown();
  return card;
}

/** The card is answered: no buttons any more, the decision in words (null: decided elsewhere). */
function decided(card, approved) {
  card.querySelector(".confirm-actions")?.remove();
  card.dataset.state = approved === null ? "gone" : approved ? "approved" : "rejected";
  const result = card.querySelector(".confirm-result");
  result.textContent = approved === null ? "No longer waiting for an approval."
    : approved ? "Approved: the device's answer is in the tool card below." : "Rejected: nothing was sent.";
  result.hidden = false;
  const turnNode = card.closest(".message-assistant");
  for (const toolCard of turnNode ? turnNode.querySelectorAll('.tool-card[data-status="waiting"]') : []) {
    updateToolCard(toolCard, { status: approved === null ? "aborted" : approved ? "approved" : "rejected" });
  }
}
