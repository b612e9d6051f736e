// The Labs dialog: graded labs of the project shown (docs/teaching.md). Whether the
// user is a teacher is the server's answer (`results().teacher`, the same check that
// lets them assign), never a guess from roles in the browser. A teacher gets the
// catalogue, assigning (chosen, or drawn by level with a seed), the open assignments
// with Close, every student's results and the CSV; a student gets the lab's title,
// brief and time limit, "Check my work" and "Next hint". Everything the server sends
// is put in the page as text.

import { ApiError } from "./api.js";
import { el } from "./render.js";
import { $, state } from "./state.js";

let view = 0; // bumped by every opening: a load that finishes late draws nothing

function status(text, kind = "info") {
  const line = $("labs-status");
  line.textContent = text;
  line.dataset.kind = kind;
}

function failed(error, doing) {
  status(`${doing}: ${error instanceof ApiError ? error.message : "the GNS3 server could not be reached."}`, "error");
}

function section(title, ...children) {
  const box = el("section", "labs-section");
  box.append(el("h3", null, title), ...children);
  return box;
}

function button(text, className, onClick) {
  const node = el("button", className, text);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

function table(headers, rows, className) {
  const node = el("table", `labs-table ${className}`);
  const head = el("tr");
  head.append(...headers.map((h) => el("th", null, h)));
  node.append(el("thead"), el("tbody"));
  node.tHead.append(head);
  for (const cells of rows) {
    const row = el("tr");
    for (const cell of cells) {
      const td = el("td");
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell === null || cell === undefined ? "" : String(cell);
      row.append(td);
    }
    node.tBodies[0].append(row);
  }
  return node;
}

function labelled(text, input) {
  const label = el("label", "labs-field", text);
  label.append(input);
  return label;
}

function input(id, attrs = {}) {
  const node = el("input");
  node.id = id;
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  return node;
}

/** A whole number in [low, high] typed by the user, or null. */
function whole(text, low, high) {
  const value = Number(String(text).trim());
  return Number.isInteger(value) && value >= low && value <= high ? value : null;
}

const minutes = (limit) => (limit ? `${limit} min` : "none");
const needs = (roles) => Object.entries(roles || {}).map(([role, family]) => `${role} (${family})`).join(", ");

/** Open the dialog on the project shown and draw the view the server says the user has. */
export async function openLabs() {
  const dialog = $("labs-dialog");
  if (!dialog.open) dialog.showModal();
  await refreshLabs();
}

export async function refreshLabs() {
  const token = ++view;
  const body = $("labs-body");
  body.replaceChildren();
  delete $("labs-dialog").dataset.role;
  if (!state.projectId) {
    status("Choose a project first.", "warn");
    return;
  }
  status("Loading…");
  const projectId = state.projectId;
  try {
    const [results, assignments] = await Promise.all([
      state.api.labResults(projectId), state.api.assignments(projectId)]);
    const scenarios = results.teacher ? await state.api.scenarios() : [];
    if (token !== view) return;
    $("labs-dialog").dataset.role = results.teacher ? "teacher" : "student";
    if (results.teacher) drawTeacher(body, projectId, scenarios, assignments, results.results);
    else drawStudent(body, projectId, assignments.filter((a) => !a.closed_at));
    status("");
  } catch (error) {
    if (token === view) failed(error, "Could not load the labs");
  }
}

// ---------------------------------------------------------------- teacher

function drawTeacher(body, projectId, scenarios, assignments, results) {
  const rows = scenarios.map((s) => {
    const pick = el("input");
    pick.type = "checkbox";
    pick.className = "labs-pick";
    pick.value = s.id;
    pick.setAttribute("aria-label", `Choose ${s.id}`);
    return [pick, s.id, s.title, s.level, needs(s.roles)];
  });
  const limit = input("labs-time-limit", { inputmode: "numeric", placeholder: "none", size: "4" });
  const level = el("select");
  level.id = "labs-level";
  for (const name of ["ccna", "ccnp"]) {
    const option = el("option", null, name);
    option.value = name;
    level.append(option);
  }
  const count = input("labs-count", { inputmode: "numeric", value: "1", size: "3" });
  const seed = input("labs-seed", { placeholder: "any", size: "8" });
  const timeLimit = () => {
    if (!limit.value.trim()) return {};
    const value = whole(limit.value, 1, 600);
    return value === null ? null : { time_limit_minutes: value };
  };
  const chosen = () => [...body.querySelectorAll(".labs-pick:checked")].map((p) => p.value);
  const assignChosen = button("Assign chosen", "primary", () => {
    const ids = chosen();
    const limited = timeLimit();
    if (!ids.length) status("Tick the scenarios to assign first.", "warn");
    else if (limited === null) status("Time limit: a whole number of minutes from 1 to 600.", "warn");
    else assign(projectId, { scenario_ids: ids, ...limited });
  });
  assignChosen.id = "labs-assign";
  const draw = button("Draw and assign", null, () => {
    const limited = timeLimit();
    const drawn = whole(count.value || "1", 1, 20);
    if (limited === null) return status("Time limit: a whole number of minutes from 1 to 600.", "warn");
    if (drawn === null) return status("Count: a whole number from 1 to 20.", "warn");
    const request = { level: level.value, count: drawn, ...limited };
    if (seed.value.trim()) request.seed = seed.value.trim();
    return assign(projectId, request);
  });
  draw.id = "labs-draw";
  const form = el("div", "labs-assign");
  form.append(labelled("Time limit (min) ", limit), assignChosen, el("span", "muted small", "or"),
    labelled("Level ", level), labelled("Count ", count), labelled("Seed ", seed), draw);

  const open = assignments.filter((a) => !a.closed_at);
  const openRows = open.map((a) => {
    const close = button("Close", "danger", () => closeAssignment(projectId, a.assignment_id));
    close.dataset.assignmentId = a.assignment_id;
    const nodes = Object.entries(a.nodes || {}).map(([role, node]) => `${role}: ${node}`).join(", ");
    return [a.title, a.scenario_id, nodes, new Date(a.assigned_at * 1000).toLocaleString(),
      minutes(a.time_limit_minutes), a.seed ?? "", close];
  });
  const resultRows = results.map((r) => [r.student, r.scenario_id, r.attempts.length, `${r.best_score}%`,
    `${r.attempts[r.attempts.length - 1].score}%`, r.hints_used,
    r.solved_seconds === null ? "not yet" : `${Math.round(r.solved_seconds)} s`,
    r.in_time === null ? "" : r.in_time ? "yes" : "no"]);
  const csv = button("Download CSV", null, () => downloadCsv(projectId));
  csv.id = "labs-csv";
  body.append(
    section("Catalogue", table(["", "id", "title", "level", "needs"], rows, "labs-catalogue"), form),
    section("Open assignments", open.length ? table(["title", "scenario", "nodes", "assigned", "time limit", "seed", ""],
      openRows, "labs-open") : el("p", "muted small labs-none", "No open assignment.")),
    section("Results", resultRows.length ? table(["student", "scenario", "attempts", "best", "last", "hints",
      "solved in", "in time"], resultRows, "labs-results") : el("p", "muted small labs-none", "No attempt yet."),
    csv),
  );
}

async function assign(projectId, body) {
  status("Assigning… (the answer comes once the fault shows on the devices)");
  for (const id of ["labs-assign", "labs-draw"]) $(id).disabled = true; // one assignment per click
  try {
    const made = await state.api.assign(projectId, body);
    await refreshLabs();
    status(`Assigned ${made.map((a) => a.scenario_id).join(", ")}.`);
  } catch (error) {
    failed(error, "Could not assign");
    for (const id of ["labs-assign", "labs-draw"]) $(id).disabled = false;
  }
}

async function closeAssignment(projectId, assignmentId) {
  try {
    await state.api.closeAssignment(projectId, assignmentId);
    await refreshLabs();
    status("Closed. What it broke stays until its faults are reverted.");
  } catch (error) {
    failed(error, "Could not close");
  }
}

async function downloadCsv(projectId) {
  try {
    const text = await state.api.labResultsCsv(projectId);
    const url = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    const link = el("a");
    link.href = url;
    link.download = `results-${projectId}.csv`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000); // the browser has read it by then
  } catch (error) {
    failed(error, "Could not download the results");
  }
}

// ---------------------------------------------------------------- student

function drawStudent(body, projectId, open) {
  if (!open.length) {
    body.append(el("p", "muted labs-none", "No lab is assigned in this project."));
    return;
  }
  for (const a of open) {
    const box = el("article", "labs-lab");
    box.dataset.assignmentId = a.assignment_id;
    const grade = el("div", "labs-grade");
    grade.setAttribute("role", "status");
    const hints = el("ol", "labs-hints");
    const hintNote = el("p", "muted small labs-hint-note");
    const check = button("Check my work", "primary labs-check", () => checkWork(projectId, a, grade));
    const hint = button("Next hint", "labs-hint", () => nextHint(projectId, a, hints, hintNote));
    const actions = el("div", "labs-actions");
    actions.append(check, hint);
    box.append(el("h3", "labs-title", a.title), el("p", "labs-brief", a.brief),
      el("p", "muted small labs-limit", `Time limit: ${minutes(a.time_limit_minutes)}`), actions, grade,
      hints, hintNote);
    body.append(box);
  }
}

async function checkWork(projectId, assignment, grade) {
  grade.replaceChildren(el("p", "muted small", "Checking on the devices…"));
  try {
    const [graded] = await state.api.checkWork(projectId, assignment.assignment_id);
    const list = el("ul", "labs-checks");
    for (const check of graded.checks) {
      const item = el("li", check.passed ? "pass" : "fail", `${check.passed ? "✓ pass" : "✗ fail"}: ` +
        `${check.kind} on ${check.device}`);
      item.dataset.passed = String(check.passed);
      list.append(item);
    }
    const score = el("p", "labs-score", `Score: ${graded.score}% (${graded.passed} of ${graded.total} checks)`);
    score.dataset.score = String(graded.score);
    grade.replaceChildren(score, list);
  } catch (error) {
    grade.replaceChildren();
    failed(error, "Could not check your work");
  }
}

async function nextHint(projectId, assignment, hints, note) {
  try {
    const served = await state.api.nextHint(projectId, assignment.assignment_id);
    const item = el("li", null, served.hint);
    item.value = served.level;
    hints.append(item);
    note.textContent = served.remaining ? `${served.remaining} more hint(s).` : "That was the last hint.";
  } catch (error) {
    if (error instanceof ApiError && error.code === "no_more_hints") note.textContent = "No more hints.";
    else failed(error, "Could not get a hint");
  }
}
