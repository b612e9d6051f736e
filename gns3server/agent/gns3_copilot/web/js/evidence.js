// Evidence beside the answer: the `evidence` event (live, or an answer's `evidence` in the
// history) drawn as a mark after each claim's sentence and a card under the answer listing
// the claims, their verdicts and links to the reads they rest on (device, command, when).
// A read's output is fetched when the user opens it. Everything is text (textContent):
// device names, commands and outputs are data, never markup.

import { el } from "./render.js";

const VERDICT = {
  verified: { mark: "\u2713", label: "verified" },
  contradicted: { mark: "\u2717", label: "contradicted by a read" },
  unsupported: { mark: "?", label: "not verified" },
  unverified: { mark: "?", label: "not verified" },
};

const verdictOf = (claim) => VERDICT[claim?.verdict] || VERDICT.unverified;
const notVerified = (claim) => !["verified", "contradicted"].includes(claim?.verdict);

/** When a read was made, as the user's clock says it. */
function when(seconds) {
  const date = new Date(Number(seconds) * 1000);
  return Number.isFinite(date.getTime()) ? date.toLocaleString() : "?";
}

/** "PC1 · show ip · 12/3/2026, 1:10:22 PM": which device, what was asked, when. */
function readLabel(read) {
  return `${read.device_label ?? read.device ?? "?"} \u00b7 ${read.command ?? ""} \u00b7 ${when(read.at)}`;
}

/** Text nodes of `root` joined, with where each one starts (to find a sentence across elements). */
function textIndex(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement?.closest("pre, code, .claim-mark")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const nodes = [];
  let text = "";
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    nodes.push({ node, start: text.length });
    text += node.data;
  }
  return { nodes, text };
}

/** Put `mark` right after the sentence `sentence` in `root` (whitespace runs count as one space);
 * false when the sentence is not found. */
function markAfter(root, sentence, mark) {
  const wanted = String(sentence || "").replace(/\s+/g, " ").trim();
  if (!wanted) return false;
  const { nodes, text } = textIndex(root);
  let flat = "";
  const origin = []; // origin[i]: where flat's i-th character is in text
  for (let i = 0; i < text.length; i++) {
    const space = /\s/.test(text[i]);
    if (space && flat.endsWith(" ")) continue;
    flat += space ? " " : text[i];
    origin.push(i);
  }
  const at = flat.indexOf(wanted);
  return at >= 0 && insertAt(nodes, origin[at + wanted.length - 1] + 1, mark);
}

function insertAt(nodes, offset, mark) {
  for (let i = nodes.length - 1; i >= 0; i--) {
    const { node, start } = nodes[i];
    if (offset > start && offset <= start + node.data.length) {
      const rest = node.splitText(offset - start);
      rest.parentNode.insertBefore(mark, rest);
      return true;
    }
  }
  return false;
}

/**
 * The card under an answer and the marks in it. `answer`: the answer's rendered text
 * (where the marks go); `load(id)`: the read's record with its output (the API's).
 */
export function evidenceCard(judgement, answer, load) {
  const claims = Array.isArray(judgement?.claims) ? judgement.claims : [];
  const reads = Array.isArray(judgement?.reads) ? judgement.reads : [];
  const counts = judgement?.counts || {};
  const card = el("details", "evidence-card");
  card.dataset.turnId = judgement?.turn_id || "";
  const unverified = claims.filter(notVerified).length;
  const contradicted = claims.filter((c) => c.verdict === "contradicted").length;
  if (unverified || contradicted) card.open = true;
  const parts = [`${counts.verified ?? 0} verified`];
  if (contradicted) parts.push(`${contradicted} contradicted`);
  if (unverified) parts.push(`${unverified} not verified`);
  const summary = el("summary", "evidence-summary");
  summary.append(el("span", "evidence-title", "Evidence"),
    el("span", "evidence-counts", claims.length ? parts.join(" \u00b7 ") : `${reads.length} device read(s)`));
  card.append(summary);

  const readItems = new Map();
  const readList = el("ul", "evidence-reads");
  for (const read of reads) {
    const item = el("li", "evidence-read");
    item.dataset.evidenceId = read.id;
    item.dataset.status = read.status || "ok";
    const open = el("button", "evidence-read-open link-button");
    open.type = "button";
    open.append(el("span", "evidence-id", read.id), document.createTextNode(" "), el("span", "evidence-what", readLabel(read)));
    const output = el("pre", "evidence-output");
    output.hidden = true;
    open.addEventListener("click", () => toggleOutput(read.id, output, load));
    item.append(open, output);
    readItems.set(read.id, item);
    readList.append(item);
  }

  const claimList = el("ol", "evidence-claims");
  claims.forEach((claim, index) => {
    const verdict = verdictOf(claim);
    const item = el("li", "evidence-claim");
    item.dataset.verdict = claim.verdict || "unverified";
    item.id = `claim-${judgement?.message_id || "m"}-${index}`;
    item.tabIndex = -1;
    const head = el("p", "evidence-claim-head");
    head.append(el("span", "evidence-verdict", verdict.label), document.createTextNode(" "),
      el("q", "evidence-claim-text", claim.text || ""));
    item.append(head);
    if (claim.reason) item.append(el("p", "evidence-reason small muted", claim.reason));
    const links = el("p", "evidence-links small");
    for (const id of claim.evidence || []) {
      const read = reads.find((r) => r.id === id);
      const link = el("button", "evidence-link link-button", read ? `${id}: ${readLabel(read)}` : id);
      link.type = "button";
      link.dataset.evidenceId = id;
      link.addEventListener("click", () => {
        const target = readItems.get(id);
        if (!target) return;
        card.open = true;
        const output = target.querySelector(".evidence-output");
        if (output.hidden) toggleOutput(id, output, load);
        target.scrollIntoView({ block: "nearest" });
      });
      links.append(link);
    }
    for (const earlier of claim.earlier || []) {
      links.append(el("span", "evidence-earlier muted", `an earlier turn read it: ${earlier.id} (${readLabel(earlier)})`));
    }
    if (links.childNodes.length) item.append(links);
    claimList.append(item);

    if (answer) {
      const mark = el("button", "claim-mark", notVerified(claim) ? `${verdict.mark} not verified` : verdict.mark);
      mark.type = "button";
      mark.dataset.verdict = claim.verdict || "unverified";
      mark.title = claim.reason ? `${verdict.label}: ${claim.reason}` : verdict.label;
      mark.setAttribute("aria-label", `Claim ${verdict.label}`);
      mark.addEventListener("click", () => {
        card.open = true;
        item.focus({ preventScroll: true });
        item.scrollIntoView({ block: "nearest" });
      });
      item.dataset.marked = String(markAfter(answer, claim.text, mark));
    }
  });
  if (claims.length) card.append(el("h4", "evidence-heading", "Claims"), claimList);
  if (reads.length) card.append(el("h4", "evidence-heading", "Device reads"), readList);
  return card;
}

async function toggleOutput(id, output, load) {
  if (!output.hidden) {
    output.hidden = true;
    return;
  }
  output.hidden = false;
  if (output.dataset.loaded === "true") return;
  output.textContent = "Loading\u2026";
  try {
    const record = await load(id);
    output.textContent = record?.output ?? "";
    output.dataset.loaded = "true";
  } catch (error) {
    output.textContent = `Could not load ${id}: ${error?.message || error}`;
  }
}
