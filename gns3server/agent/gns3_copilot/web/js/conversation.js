// The conversation view: user bubbles and assistant turns (text segments and tool cards
// in the order they happened), a stored history drawn again, and the scrolling that
// follows a streaming answer unless the user scrolled up.

import { showChange } from "./changes.js";
import { evidenceCard } from "./evidence.js";
import { resetMeter } from "./meter.js";
import { el, markdownFragment, toolCard, updateToolCard } from "./render.js";
import { $ } from "./state.js";

export function clearConversation() {
  const messages = $("messages");
  messages.replaceChildren($("empty-chat") || emptyChat());
  $("empty-chat").hidden = false;
  resetMeter();
}

function emptyChat() {
  const box = el("div", "empty-chat");
  box.id = "empty-chat";
  box.append(el("h2", null, "Ask about this project"));
  return box;
}

export function hideEmpty() {
  const empty = $("empty-chat");
  if (empty) empty.hidden = true;
}

export function nearBottom(box) {
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

export function scrollDown(force = false) {
  const box = $("messages");
  if (force || box.dataset.follow !== "false") box.scrollTop = box.scrollHeight;
}

/** A user message; `id`: the id it is stored with (the summary marker is placed by it). */
export function userBubble(text, id) {
  const item = el("article", "message message-user");
  item.setAttribute("aria-label", "You");
  if (id) item.dataset.messageId = id;
  item.append(el("div", "bubble", text));
  return item;
}

/** An assistant turn: text segments and tool cards in the order they happened. */
export class Turn {
  constructor() {
    this.node = el("article", "message message-assistant");
    this.node.setAttribute("aria-label", "Copilot");
    this.cards = new Map();
    this.segment = null;
    this.text = "";
    this.timer = null;
  }

  appendText(chunk) {
    if (!this.segment) {
      this.segment = el("div", "bubble markdown");
      this.node.append(this.segment);
      this.text = "";
    }
    this.text += chunk;
    if (!this.timer) this.timer = setTimeout(() => this.flush(), 40);
  }

  flush() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.segment) {
      this.segment.replaceChildren(markdownFragment(this.text));
      scrollDown();
    }
  }

  card(event) {
    let card = this.cards.get(event.tool_call_id);
    if (!card) {
      this.flush();
      this.segment = null; // text after a tool call starts a new segment
      card = toolCard({ id: event.tool_call_id, name: event.name, args: event.args });
      this.cards.set(event.tool_call_id, card);
      this.node.append(card);
      scrollDown();
    }
    return card;
  }

  note(kind, text) {
    this.flush();
    this.segment = null;
    const note = el("p", `turn-note turn-note-${kind}`, text);
    if (kind === "error") note.setAttribute("role", "alert");
    this.node.append(note);
    scrollDown();
  }

  /**
   * The evidence of the answer so far (the `evidence` event, or an answer's in the history):
   * a mark after each claim in the answer's text, the card after it. `load(id)`: a read's record.
   */
  showEvidence(judgement, load) {
    this.flush();
    const answers = this.node.querySelectorAll(".bubble.markdown");
    this.node.append(evidenceCard(judgement, answers[answers.length - 1] || null, load));
    this.segment = null; // text after it (a later run of the turn) starts a new segment
    scrollDown();
  }

  finish(status) {
    this.flush();
    for (const card of this.cards.values()) {
      if (card.dataset.status === "pending" || card.dataset.status === "running") {
        const end = status === "waiting_confirmation" ? "waiting" : status === "aborted" ? "aborted" : "error";
        updateToolCard(card, { status: end });
      }
    }
    this.node.dataset.status = status;
  }
}

/** Draw a stored conversation; returns its last assistant turn (null if it ends with the user).
 * `load(id)`: an evidence record of the session, for the answers' evidence cards. */
export function renderHistory(messages, load) {
  const box = $("messages");
  box.replaceChildren($("empty-chat") || emptyChat());
  hideEmpty();
  let turn = null;
  for (const message of messages) {
    if (message.role === "user") {
      turn = null;
      box.append(userBubble(message.content, message.id));
    } else if (message.role === "assistant") {
      if (!turn) {
        turn = new Turn();
        box.append(turn.node);
      }
      if (message.content) {
        turn.segment = null;
        turn.appendText(message.content);
        turn.flush();
        turn.segment = null;
      }
      if (message.evidence) turn.showEvidence(message.evidence, load);
      for (const call of message.tool_calls || []) turn.card({ tool_call_id: call.id, name: call.name, args: call.args });
    } else if (message.role === "tool") {
      if (!turn) {
        turn = new Turn();
        box.append(turn.node);
      }
      const card = turn.card({ tool_call_id: message.tool_call_id, name: message.name, args: undefined });
      updateToolCard(card, { status: message.status || "success", output: message.content });
      showChange(card, message.content);
    }
  }
  if (!messages.length) $("empty-chat").hidden = false;
  box.dataset.follow = "true";
  scrollDown(true);
  return turn; // the last assistant turn (null if the conversation ends with the user)
}

/** Focus the approval card still waiting for a decision, if there is one; says whether there was. */
export function focusConfirmCard() {
  const cards = $("messages").querySelectorAll('.confirm-card[data-state="waiting"]');
  const card = cards[cards.length - 1];
  if (!card) return false;
  card.focus({ preventScroll: true });
  card.scrollIntoView({ block: "nearest" });
  return true;
}
