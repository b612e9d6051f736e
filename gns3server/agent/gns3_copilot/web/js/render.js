// Rendering of answers and tool calls. The only path from model text to HTML is
// markdownFragment(): Markdown -> HTML (marked) -> sanitised DOM (DOMPurify), never
// an HTML string put into the page. Tool arguments and output are shown as text.

import { Marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const markdown = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // No remote images in answers (a prompt-injected answer could leak data through
    // an image URL): an image becomes a plain link the user may choose to follow.
    image({ href, text }) {
      const label = text ? `image: ${text}` : "image";
      return `<a href="${escapeHtml(href || "")}">[${escapeHtml(label)}]</a>`;
    },
  },
});

const SANITIZE = {
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "option", "iframe", "frame",
    "object", "embed", "svg", "math", "video", "audio", "source", "picture", "link", "meta", "base", "dialog"],
  FORBID_ATTR: ["style", "id", "name", "class", "srcset", "action", "formaction"],
  ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
  RETURN_DOM_FRAGMENT: true,
};

// Links open outside the panel and tell the target nothing about it.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    if (node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  }
});

/** Sanitised DOM for a Markdown text (safe to insert as is). */
export function markdownFragment(text) {
  const html = markdown.parse(String(text ?? ""), { async: false });
  return DOMPurify.sanitize(html, SANITIZE);
}

/** Create an element with a class and optional text (never HTML). */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function pretty(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") {
    const text = value.trim();
    if ((text.startsWith("{") && text.endsWith("}")) || (text.startsWith("[") && text.endsWith("]"))) {
      try {
        return JSON.stringify(JSON.parse(text), null, 2); // tool output that is JSON, indented
      } catch {
        return value;
      }
    }
    return value;
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

const STATUS_LABEL = { pending: "queued", running: "running…", success: "done", error: "failed", aborted: "stopped",
  waiting: "awaiting approval", approved: "approved", rejected: "rejected" };

/** A collapsible card for one tool call; update it with updateToolCard(). */
export function toolCard({ id, name, args }) {
  const card = el("details", "tool-card");
  card.dataset.toolCallId = id || "";
  card.dataset.status = "pending";
  const summary = el("summary", "tool-summary");
  summary.append(el("span", "tool-icon", "\u2699"), el("span", "tool-name", name || "tool"),
    el("span", "tool-status", STATUS_LABEL.pending));
  const body = el("div", "tool-body");
  body.append(el("h4", "tool-heading", "Arguments"), el("pre", "tool-args", pretty(args) || "{}"));
  const outputHead = el("h4", "tool-heading tool-output-heading", "Output");
  const output = el("pre", "tool-output");
  outputHead.hidden = true;
  output.hidden = true;
  body.append(outputHead, output);
  card.append(summary, body);
  return card;
}

export function updateToolCard(card, { status, output, args, name }) {
  if (name) card.querySelector(".tool-name").textContent = name;
  if (args !== undefined) card.querySelector(".tool-args").textContent = pretty(args) || "{}";
  if (status) {
    const normal = Object.hasOwn(STATUS_LABEL, status) && status !== "pending" ? status : "success";
    card.dataset.status = normal;
    card.querySelector(".tool-status").textContent = STATUS_LABEL[normal];
  }
  if (output !== undefined) {
    const pre = card.querySelector(".tool-output");
    pre.textContent = pretty(output);
    pre.hidden = false;
    card.querySelector(".tool-output-heading").hidden = false;
  }
}

/**
 * The approve/reject card for tool calls a run waits on (device configuration
 * commands): what would be sent, as text. The caller wires the two buttons
 * (`.confirm-approve`, `.confirm-reject`) and removes `.confirm-actions` once decided.
 */
export function confirmCard(calls) {
  const card = el("section", "confirm-card");
  card.tabIndex = -1;
  card.setAttribute("role", "group");
  card.setAttribute("aria-label", "Approve or reject the device configuration");
  card.dataset.state = "waiting";
  card.append(el("h3", "confirm-title", calls.length === 1
    ? "The copilot wants to configure a device" : `The copilot wants to run ${calls.length} configuration calls`));
  for (const call of calls) {
    const args = call && typeof call.args === "object" && call.args ? call.args : {};
    const item = el("div", "confirm-call");
    item.dataset.toolCallId = call?.tool_call_id || "";
    if (typeof args.device === "string" || Array.isArray(args.commands)) {
      const head = el("p", "confirm-device");
      head.append(el("span", "muted", "Device "), el("strong", "confirm-device-name", args.device ?? "?"));
      const commands = Array.isArray(args.commands) ? args.commands.map(String).join("\n") : pretty(args.commands);
      item.append(head, el("pre", "confirm-commands", commands));
    } else {
      item.append(el("p", "confirm-device", call?.name || "tool"), el("pre", "confirm-commands", pretty(args) || "{}"));
    }
    card.append(item);
  }
  const actions = el("div", "confirm-actions");
  const approve = el("button", "primary confirm-approve", "Approve");
  approve.type = "button";
  const reject = el("button", "danger confirm-reject", "Reject");
  reject.type = "button";
  actions.append(approve, reject);
  card.append(actions, el("p", "confirm-result small muted"));
  card.querySelector(".confirm-result").hidden = true;
  return card;
}

const fmt = (n) => (typeof n === "number" && Number.isFinite(n) ? n.toLocaleString("en-US") : "?");

/** The meter's texts for a context report (see ContextReport in context_manager.py): its headline, the
 * figure the budget is judged in (the model server's tokens once calibrated; an older server: our count). */
export function describeReport(report) {
  const used = report.headline_tokens ?? report.total_tokens;
  const limit = report.limit_tokens;
  const shown = report.headline_percent ?? report.percent;
  const percent = typeof shown === "number" ? shown : (limit ? (100 * used) / limit : 0);
  const strategy = report.strategy || "balanced";
  const headline = `${fmt(used)} / ${fmt(limit)} tokens · ${percent.toFixed(1)}% · ${strategy}`;
  const notes = [];
  if (report.messages_dropped > 0) {
    notes.push(`${report.messages_dropped} older message${report.messages_dropped === 1 ? "" : "s"} left out`);
  }
  const truncated = Array.isArray(report.truncated) ? report.truncated.length : 0;
  if (truncated > 0) notes.push(`${truncated} long item${truncated === 1 ? "" : "s"} shortened`);
  if (report.topology_reduced) notes.push("topology shown in reduced detail");
  if (report.topology_available === false) notes.push("topology unavailable");
  if (report.interrupted_calls > 0) notes.push(`${report.interrupted_calls} interrupted tool call(s) repaired`);
  if (report.over_budget) notes.push("over budget: only the question fits");
  const budget = report.headline_budget ?? report.budget;
  const budgetShare = limit && budget ? Math.min(100, (100 * budget) / limit) : null;
  const parts = [`system ${fmt(report.system_tokens)}`, `topology ${fmt(report.topology_tokens)}`,
    `tools ${fmt(report.tools_tokens)}`, `history ${fmt(report.history_tokens)}`];
  const detail = `${parts.join(" · ")} — budget ${fmt(budget)} tokens`;
  return { headline, notes, percent: Math.max(0, Math.min(100, percent)), budgetShare, detail };
}
