"""Graded labs: a teacher assigns scenarios, students check their work and ask for hints.

Who is a teacher is GNS3's answer: a user GNS3 lets modify the project
(``Project.Modify`` on it, asked in-process); everyone else who may read the
project is a student. Every device command runs through the copilot's tools and
their gate, as the user asking (GNS3's RBAC, the console policy, the audit):

* **assign**: the scenario's injection, under an approval the teacher's request
  is (``assign:<assignment id>``, bound to exactly those calls), recorded as
  the teacher's faults with the scenario's revert as their undo (so ``GET
  .../faults`` and its revert work for the teacher, and for nobody else);
* **check**: the scenario's checks read with read-only commands as the student;
  the student sees each check's pass or fail by kind and device, never what it
  expects (that would be the fix); the teacher sees everything;
* **hint**: the next of the three levels, counted per student.
"""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from ..changes.transaction import readings_of
from ..checks import Check, Reading, run_checks
from ..console import UnknownDriverError
from ..console.registry import Drivers
from ..errors import CopilotError, ErrorKind
from ..gns3_client.client import GNS3Client
from ..service.faults import SQLiteFaultStore
from ..tools.approval import ApprovalGrant
from ..tools.errors import TOOL_ERRORS
from ..tools.gate import ToolGate
from ..tools.permissions import Authorize
from ..tools.toolset import ConsoleServices, RunContext, build_tools
from .catalogue import Catalogue
from .dns import DNS_COMMAND, DNSServer, dns_verdict
from .guard import UndoGuard
from .scenario import RenderedScenario, Scenario
from .store import Assignment, Attempt, TeachingStore

log = logging.getLogger(__name__)

__all__ = ["Learner", "TeachingService", "learner_for"]

PROJECT_MODIFY = "Project.Modify"
SHOW, CONFIG = "gns3_show_commands", "gns3_config_commands"
FAULT_VISIBLE_SECONDS = 60.0
"""How long an assignment waits for its checks to fail (a neighbour takes its dead interval to go)."""


class TeachingForbiddenError(CopilotError):
    """Only a user GNS3 lets modify the project may assign labs or read everyone's results."""

    kind = ErrorKind.FORBIDDEN
    code = "teaching_forbidden"


class AssignmentNotFoundError(CopilotError):
    kind = ErrorKind.NOT_FOUND
    code = "assignment_not_found"


class AssignmentFailedError(CopilotError):
    """The scenario could not be put into the lab (a role unmatched, a device refused the commands)."""

    kind = ErrorKind.CONFLICT
    code = "assignment_failed"


class NoMoreHintsError(CopilotError):
    kind = ErrorKind.CONFLICT
    code = "no_more_hints"


@dataclass(frozen=True)
class Learner:
    """Who asks: the GNS3 user, and the tools bound to them for this project."""

    user_id: str
    username: str
    tools: Callable[[str, str], Awaitable[Sequence[BaseTool]]]
    """``tools(project_id, session_id)``: the copilot's tools acting as this user."""
    nodes: Callable[[str], Awaitable[list[Mapping[str, Any]]]]
    """The project's nodes as GNS3 shows them to this user."""


def learner_for(user_id: str, username: str, client_factory: Callable[[], GNS3Client],
                console: ConsoleServices | None) -> Learner:
    """A user with the copilot's tools and GNS3's view of a project bound to them (their token in the factory)."""

    async def tools(project_id: str, session_id: str) -> list[BaseTool]:
        context = RunContext(client_factory, project_id, username, session_id, user_id)
        return await asyncio.to_thread(build_tools, context, console)  # pydantic work: off the loop

    async def nodes(project_id: str) -> list[Mapping[str, Any]]:
        async with client_factory() as client:  # GNS3's refusals keep their kinds (the error tree)
            return list(await client.nodes(project_id))

    return Learner(user_id, username, tools, nodes)


def _family(node: Mapping[str, Any]) -> str | None:
    """The family the console tools drive ``node`` as, from what GNS3 says of the node itself
    (scenarios run on VPCS, Linux and FRR: the built-in drivers)."""
    try:
        return Drivers().pick(node).driver.name
    except UnknownDriverError:
        return None


def match_roles(scenario: Scenario, nodes: Sequence[Mapping[str, Any]], given: Mapping[str, str]) -> dict[str, str]:
    """Role -> node name: the teacher's choice, else the first free node of the role's family by name.

    AssignmentFailedError naming the role that no node can play.
    """
    names = {str(n.get("name")) for n in nodes}
    unknown = sorted(set(given) - set(scenario.roles))
    if unknown:
        raise AssignmentFailedError(f"nodes: {', '.join(unknown)} is not a role of {scenario.id}")
    chosen = {}
    for role, node in given.items():
        if node not in names:
            raise AssignmentFailedError(f"nodes.{role}: the project has no node {node!r}")
        chosen[role] = node
    for role in sorted(scenario.roles):
        if role in chosen:
            continue
        family = scenario.roles[role].family
        free = sorted(str(n.get("name")) for n in nodes if _family(n) == family and str(n.get("name"))
                      not in chosen.values())
        if not free:
            raise AssignmentFailedError(f"nodes.{role}: no {family} node in the project can play it; name one")
        chosen[role] = free[0]
    return chosen


class TeachingService:
    """Assignments, checks and hints (see the module's docstring)."""

    def __init__(self, store: TeachingStore, faults: SQLiteFaultStore | None, catalogue: Callable[[], Catalogue],
                 authorize: Callable[[str], Authorize], *, fault_visible_seconds: float = FAULT_VISIBLE_SECONDS,
                 interval: float = 1.0) -> None:
        self._store = store
        self._faults = faults
        self._catalogue = catalogue
        self._authorize = authorize
        self._visible = fault_visible_seconds
        self._interval = interval

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue()

    async def has_open(self, project_id: str) -> bool:
        """Whether the project has an open assignment (a run then offers ``gns3_check_work``)."""
        return bool(await self._store.assignments(project_id, open_only=True))

    async def is_teacher(self, user_id: str, project_id: str, superadmin: bool = False) -> bool:
        return superadmin or await self._authorize(user_id)(PROJECT_MODIFY, f"/projects/{project_id}") == "allowed"

    async def _teacher(self, who: Learner, project_id: str, superadmin: bool) -> None:
        if not await self.is_teacher(who.user_id, project_id, superadmin):
            raise TeachingForbiddenError("Only a user GNS3 lets modify this project may do this (a teacher)")

    # ------------------------------------------------------------------ assign

    async def assign(
        self, who: Learner, project_id: str, *, scenario_ids: Sequence[str] = (), level: str | None = None,
        count: int = 1, seed: int | str | None = None, nodes: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None, time_limit_minutes: int | None = None, superadmin: bool = False,
    ) -> list[Assignment]:
        """Put scenarios into the project: chosen by id, or ``count`` of ``level`` drawn with ``seed``."""
        await self._teacher(who, project_id, superadmin)
        catalogue = self.catalogue
        project_nodes = await who.nodes(project_id)
        if scenario_ids:
            chosen = [catalogue.get(i) for i in scenario_ids]
        elif level is not None:
            fits = [s for s in catalogue.by_level(level) if self._fits(s, project_nodes, nodes or {})]
            chosen = catalogue.draw(level, count, seed if seed is not None else time.time_ns(), fits)
        else:
            raise ValueError("scenario_ids: name scenarios, or give a level to draw from")
        made = []
        for scenario in chosen:
            given = {r: n for r, n in (nodes or {}).items() if r in scenario.roles}
            bound = match_roles(scenario, project_nodes, given)
            own_params = {k: v for k, v in (params or {}).items() if k in scenario.params}
            try:
                rendered = scenario.render(bound, own_params)
            except ValueError as exc:
                raise AssignmentFailedError(f"{scenario.id}: {exc}") from None
            made.append(await self._inject(who, project_id, scenario, rendered, bound, own_params,
                                           None if seed is None else str(seed),
                                           time_limit_minutes or scenario.time_limit_minutes))
        return made

    async def assign_and_show(self, who: Learner, project_id: str, *, wait_until_broken: bool = True,
                              superadmin: bool = False, **choice: Any) -> list[dict[str, Any]]:
        """:meth:`assign`, then each assignment's teacher view with ``broken``: whether a check failed
        within the time a fault takes to show (None: not waited for)."""
        made = await self.assign(who, project_id, superadmin=superadmin, **choice)
        broken = {a.assignment_id: await self.wait_until_broken(who, a) if wait_until_broken else None for a in made}
        views = {v["assignment_id"]: v for v in await self.assignments(who, project_id, superadmin)}
        return [{**views[a.assignment_id], "broken": broken[a.assignment_id]} for a in made]

    @staticmethod
    def _fits(scenario: Scenario, nodes: Sequence[Mapping[str, Any]], given: Mapping[str, str]) -> bool:
        try:
            match_roles(scenario, nodes, {r: n for r, n in given.items() if r in scenario.roles})
        except AssignmentFailedError:
            return False
        return True

    async def _inject(
        self, who: Learner, project_id: str, scenario: Scenario, rendered: RenderedScenario, bound: dict[str, str],
        params: dict[str, str], seed: str | None, time_limit: int | None,
    ) -> Assignment:
        assignment_id = self._store.new_id()
        session_id = f"teaching-{assignment_id}"
        gate = ToolGate(await who.tools(project_id, session_id), errors=TOOL_ERRORS)
        families = {bound[r]: scenario.roles[r].family for r in scenario.roles}
        calls = [{"name": CONFIG, "id": f"inject-{i}", "args": {"device": device, "commands": list(commands),
                                                              "driver": families[device]}}
                 for i, (device, commands) in enumerate(rendered.inject)]
        scope = {"project_id": project_id, "assignment_id": assignment_id}
        grant = ApprovalGrant(f"assign:{assignment_id}", gate.digest(calls, **scope), who.username, time.time())
        approved = gate.verify(grant, calls, **scope)
        outcomes = []
        for call in calls:  # in order: a scenario's steps may depend on each other
            outcome = await gate.run(call, approved=approved)
            outcomes.append(outcome)
            if not _applied(outcome):
                break
        fault_ids = await self._record(who, project_id, session_id, rendered, families, outcomes)
        failed = next((o for o in outcomes if not _applied(o)), None)
        if failed is not None:
            raise AssignmentFailedError(f"{scenario.id} could not be injected on {failed.call['args']['device']}: "
                                        f"{_why_not(failed)} (the teacher's faults list what was sent)")
        assignment = Assignment(assignment_id, project_id, who.user_id, who.username, scenario.id, bound, params, seed,
                                fault_ids, time_limit, time.time())
        await self._store.add_assignment(assignment)
        log.info("Scenario %s assigned in project %s by %s", scenario.id, project_id, who.username)
        return assignment

    async def _record(self, who: Learner, project_id: str, session_id: str, rendered: RenderedScenario,
                      families: Mapping[str, str], outcomes: Sequence[Any]) -> list[str]:
        """The injection as the teacher's faults, each device's revert as its undo."""
        if self._faults is None:
            return []
        undo = {device: {"tool": CONFIG, "args": {"device": device, "commands": list(commands),
                                                  "driver": families[device]}}
                for device, commands in rendered.revert}
        ids = []
        for outcome in outcomes:
            device = outcome.call["args"]["device"]
            record = await self._faults.record(session_id, project_id, who.user_id, outcome.name,
                                               outcome.call["args"], outcome.status, outcome.output,
                                               undo=undo.pop(device, None))
            ids.append(record.fault_id)
        return ids

    async def wait_until_broken(self, who: Learner, assignment: Assignment) -> bool:
        """Whether a check of the assignment fails within the time a fault takes to show."""
        end = time.monotonic() + self._visible
        while True:
            _, passed, total = await self._judge(who, assignment, immediate=True)
            if passed < total:
                return True
            if time.monotonic() > end:
                return False
            await asyncio.sleep(self._interval)  # polling the lab's state with a deadline

    # ------------------------------------------------------------------ check

    def _rendered(self, assignment: Assignment) -> tuple[Scenario, RenderedScenario]:
        scenario = self.catalogue.get(assignment.scenario_id)
        return scenario, scenario.render(assignment.nodes, assignment.params)

    async def _judge(self, who: Learner, assignment: Assignment, *, immediate: bool = False
                     ) -> tuple[list[dict[str, Any]], int, int]:
        """Each check's verdict (teacher's form), passed and total, read as ``who``."""
        scenario, rendered = self._rendered(assignment)
        families = {assignment.nodes[r]: scenario.roles[r].family for r in scenario.roles}
        gate = ToolGate(await who.tools(assignment.project_id, f"teaching-check-{assignment.assignment_id}"),
                        read_only=True, restriction="for a lab check", errors=TOOL_ERRORS)

        async def read(device: str, commands: list[str]) -> list[Reading]:
            fmt = "json" if families[device] == "frr" else "text"
            call = {"name": SHOW, "id": "", "args": {"devices": [device], "commands": commands,
                                                     "driver": families[device], "format": fmt}}
            outcome = await gate.run(call)
            result = outcome.result if isinstance(outcome.result, Mapping) else {}
            batches = result.get("devices") or []
            batch = batches[0] if batches else {"results": [{"command": c, "status": "failed",
                                                             "output": outcome.reason or ""} for c in commands]}
            return readings_of(device, batch, time.time())

        typed = [c for c in rendered.checks if not isinstance(c, DNSServer)]
        if immediate:
            typed = [c.model_copy(update={"within": 0.0, "hold": 0.0}) for c in typed]
        report = await run_checks(typed, families, read, interval=self._interval) if typed else None
        verdicts: list[dict[str, Any]] = []
        by_check = iter(report.verdicts if report else [])
        for check in rendered.checks:
            if isinstance(check, DNSServer):
                family = families[check.device]
                command = DNS_COMMAND.get(family)
                readings = await read(check.device, [command]) if command else []
                output = readings[0].output if readings and readings[0].ok else None
                verdicts.append(dns_verdict(check, family, output))
            else:
                verdict = next(by_check)
                verdicts.append(_verdict(check, verdict))
        passed = sum(1 for v in verdicts if v["passed"])
        return verdicts, passed, len(verdicts)

    async def check_work(self, who: Learner, project_id: str, assignment_id: str | None = None) -> list[dict[str, Any]]:
        """Grade the student's lab now: one attempt per open assignment (or the one named), recorded."""
        assignments = [a for a in await self._store.assignments(project_id, open_only=True)
                       if assignment_id is None or a.assignment_id == assignment_id]
        if assignment_id is not None and not assignments:
            raise AssignmentNotFoundError(f"No open assignment {assignment_id} in this project")
        graded = []
        for assignment in assignments:
            verdicts, passed, total = await self._judge(who, assignment)
            attempt = await self._store.add_attempt(assignment, who.user_id, who.username, passed, total, verdicts)
            graded.append(self._attempt_view(assignment, attempt, teacher=False))
        return graded

    def _attempt_view(self, assignment: Assignment, attempt: Attempt, *, teacher: bool) -> dict[str, Any]:
        scenario = self.catalogue.scenarios.get(assignment.scenario_id)
        checks = attempt.results if teacher else [student_verdict(v) for v in attempt.results]
        return {"assignment_id": assignment.assignment_id, "scenario_id": assignment.scenario_id,
                "title": scenario.title if scenario else assignment.scenario_id, "attempt_id": attempt.attempt_id,
                "student": attempt.student_name, "at": attempt.at, "score": attempt.score,
                "passed": attempt.passed, "total": attempt.total, "checks": checks}

    async def close(self, who: Learner, project_id: str, assignment_id: str, superadmin: bool = False) -> None:
        """End an assignment (teachers only): no more checks or hints, its faults no longer guarded.

        What it broke stays broken until the teacher reverts its faults (``POST .../faults/{id}/revert``)."""
        await self._teacher(who, project_id, superadmin)
        await self._assignment(project_id, assignment_id)
        await self._store.close(assignment_id)

    # ------------------------------------------------------------------ hints, views

    async def hint(self, who: Learner, project_id: str, assignment_id: str) -> dict[str, Any]:
        assignment = await self._assignment(project_id, assignment_id)
        if assignment.closed_at is not None:
            raise AssignmentNotFoundError(f"Assignment {assignment_id} is closed")
        _, rendered = self._rendered(assignment)
        level = await self._store.serve_hint(assignment_id, who.user_id, len(rendered.hints))
        if level is None:
            raise NoMoreHintsError(f"Every hint of this assignment was served ({len(rendered.hints)})")
        return {"assignment_id": assignment_id, "level": level, "hint": rendered.hints[level - 1],
                "remaining": len(rendered.hints) - level}

    async def _assignment(self, project_id: str, assignment_id: str) -> Assignment:
        found = [a for a in await self._store.assignments(project_id) if a.assignment_id == assignment_id]
        if not found:
            raise AssignmentNotFoundError(f"No assignment {assignment_id} in this project")
        return found[0]

    async def assignments(self, who: Learner, project_id: str, superadmin: bool = False) -> list[dict[str, Any]]:
        """The project's assignments: what a student is told (the brief), the teacher also where and how."""
        teacher = await self.is_teacher(who.user_id, project_id, superadmin)
        views = []
        for assignment in await self._store.assignments(project_id):
            scenario, rendered = self._rendered(assignment)
            view: dict[str, Any] = {
                "assignment_id": assignment.assignment_id, "scenario_id": scenario.id, "title": scenario.title,
                "level": scenario.level, "topic": scenario.topic, "brief": rendered.brief,
                "time_limit_minutes": assignment.time_limit_minutes, "assigned_at": assignment.created_at,
                "closed_at": assignment.closed_at, "hints": len(rendered.hints)}
            if teacher:
                view.update(nodes=assignment.nodes, params=assignment.params, seed=assignment.seed,
                            fault_ids=assignment.fault_ids, teacher=assignment.teacher_name)
            views.append(view)
        return views

    async def results(self, who: Learner, project_id: str, superadmin: bool = False) -> dict[str, Any]:
        """Attempts, scores, hints used and time: every student's for the teacher, one's own otherwise."""
        teacher = await self.is_teacher(who.user_id, project_id, superadmin)
        attempts = await self._store.attempts(project_id, None if teacher else who.user_id)
        assignments = {a.assignment_id: a for a in await self._store.assignments(project_id)}
        hints = await self._store.hints_used(project_id)
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for attempt in attempts:
            assignment = assignments.get(attempt.assignment_id)
            if assignment is None:
                continue
            key = (attempt.assignment_id, attempt.student_id)
            row = rows.setdefault(key, {
                "assignment_id": attempt.assignment_id, "scenario_id": assignment.scenario_id,
                "student": attempt.student_name, "attempts": [], "best_score": 0.0, "solved_seconds": None,
                "hints_used": hints.get(key, 0), "time_limit_minutes": assignment.time_limit_minutes})
            row["attempts"].append(self._attempt_view(assignment, attempt, teacher=teacher))
            row["best_score"] = max(row["best_score"], attempt.score)
            if attempt.score >= 100.0 and row["solved_seconds"] is None:
                row["solved_seconds"] = round(attempt.at - assignment.created_at, 1)
        for row in rows.values():
            limit = row["time_limit_minutes"]
            row["in_time"] = None if limit is None or row["solved_seconds"] is None else (
                row["solved_seconds"] <= limit * 60)
        return {"teacher": teacher, "results": list(rows.values())}

    async def results_csv(self, who: Learner, project_id: str, superadmin: bool = False) -> str:
        await self._teacher(who, project_id, superadmin)
        results = (await self.results(who, project_id, superadmin))["results"]
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["assignment_id", "scenario_id", "student", "attempts", "best_score", "last_score",
                         "hints_used", "solved_seconds", "time_limit_minutes", "in_time"])
        for row in results:
            writer.writerow([row["assignment_id"], row["scenario_id"], _cell(row["student"]), len(row["attempts"]),
                             row["best_score"], row["attempts"][-1]["score"], row["hints_used"],
                             row["solved_seconds"] if row["solved_seconds"] is not None else "",
                             row["time_limit_minutes"] or "", "" if row["in_time"] is None else row["in_time"]])
        return out.getvalue()

    # ------------------------------------------------------------------ the guard

    def guard(self, user_id: str, project_id: str) -> UndoGuard:
        """A gate callback refusing ``user_id`` the recorded undo of the project's open assignments they
        did not assign (see ``guard.py``)."""

        async def undos() -> list[Mapping[str, Any]]:
            if self._faults is None:
                return []
            faults = {f.fault_id: f for f in await self._faults.list(project_id, None)}
            found: list[Mapping[str, Any]] = []
            for assignment in await self._store.assignments(project_id, open_only=True):
                if assignment.teacher_id == user_id:
                    continue
                for fault_id in assignment.fault_ids:
                    fault = faults.get(fault_id)
                    if fault is not None and fault.undo and fault.reverted_at is None:
                        found.append(fault.undo)
            return found

        return UndoGuard(undos)


def _verdict(check: Check, verdict: Any) -> dict[str, Any]:
    return {"device": check.device, "kind": check.kind, "subject": check.subject(), "expected": check.expected(),
            "status": verdict.status, "passed": bool(verdict.passed), "observed": str(verdict.observed)}


def _applied(outcome: Any) -> bool:
    """Whether a step ran and the device took every command (no error line: a fault half made is no lab)."""
    result = outcome.result
    return outcome.status == "success" and (not isinstance(result, Mapping) or result.get("status") == "ok")


def _why_not(outcome: Any) -> str:
    if outcome.status != "success":
        return str(outcome.reason or outcome.output)
    said = [f"{r.get('command')}: {', '.join(r.get('errors') or []) or r.get('status')}"
            for r in outcome.result.get("results") or [] if r.get("status") != "ok"]
    return "the device refused " + "; ".join(said) if said else str(outcome.result.get("status"))


def student_verdict(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """What a student sees of a check: its kind, the device, pass or fail; not what it expects (the fix)."""
    return {"device": verdict["device"], "kind": verdict["kind"], "passed": verdict["passed"],
            "status": verdict["status"]}


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
