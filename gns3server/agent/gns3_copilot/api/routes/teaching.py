"""Graded labs over HTTP: the catalogue, assignments, "check my work", hints, results (``docs/teaching.md``).

A teacher is a user GNS3 lets modify the project (``Project.Modify``, asked
in-process); any user who may read the project is a student of it. Students
see the scenario's brief, their own attempts (each check's kind, device and
pass or fail) and the hints served to them; never a scenario's injection,
revert or checks' expected values, nor another student's results.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from ...errors import CopilotError, ErrorKind
from ...service.copilot import User
from ...teaching.service import Learner, TeachingService, learner_for
from ...teaching.tools import scenario_summaries
from ..dependencies import CurrentUser, ProjectId, State
from ..state import CopilotState

router = APIRouter()


class TeachingOffError(CopilotError):
    kind = ErrorKind.UNAVAILABLE
    code = "teaching_unavailable"


class AssignRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenario_ids: list[str] = Field(default_factory=list, max_length=20)
    level: str | None = Field(None, description="ccna or ccnp: draw count scenarios of that level")
    count: int = Field(1, ge=1, le=20)
    seed: int | str | None = Field(None, description="the same seed draws the same scenarios")
    nodes: dict[str, str] = Field(default_factory=dict, description="role -> node name (else matched by family)")
    params: dict[str, str] = Field(default_factory=dict, description="overrides of the scenarios' parameters")
    time_limit_minutes: int | None = Field(None, ge=1, le=600)
    wait_until_broken: bool = Field(True, description="answer once a check of each assignment fails")


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assignment_id: str | None = None


def teaching_of(state: CopilotState) -> TeachingService:
    if state.teaching is None:
        raise TeachingOffError("Graded labs are not available on this server")
    return state.teaching


def learner(state: CopilotState, user: User) -> Learner:
    """The user, with the copilot's tools and GNS3's view of the project bound to them."""
    return learner_for(user.user_id, user.username, lambda: state.gns3_client(user.token), state.console)


@router.get("/teaching/scenarios")
async def scenarios(user: CurrentUser, state: State) -> list[dict[str, Any]]:
    """The catalogue, as anyone may read it: titles, levels, topics, roles; never a fault or its fix."""
    return scenario_summaries(teaching_of(state))


@router.post("/projects/{project_id}/teaching/assignments", status_code=201,
             responses={403: {"description": "Not a teacher of this project"},
                        404: {"description": "No such scenario"},
                        413: {"description": "Request body too large"},
                        409: {"description": "The scenario cannot be put into this lab"}})
async def assign(body: AssignRequest, project_id: ProjectId, user: CurrentUser, state: State) -> list[dict[str, Any]]:
    """Assign scenarios to the project: chosen, or drawn by level with a seed (teachers only)."""
    return await teaching_of(state).assign_and_show(
        learner(state, user), project_id, scenario_ids=body.scenario_ids, level=body.level, count=body.count,
        seed=body.seed, nodes=body.nodes, params=body.params, time_limit_minutes=body.time_limit_minutes,
        wait_until_broken=body.wait_until_broken, superadmin=user.is_superadmin)


@router.get("/projects/{project_id}/teaching/assignments")
async def assignments(project_id: ProjectId, user: CurrentUser, state: State) -> list[dict[str, Any]]:
    """The project's assignments: the brief for students, also nodes, params and faults for the teacher."""
    return await teaching_of(state).assignments(learner(state, user), project_id, user.is_superadmin)


@router.post("/projects/{project_id}/teaching/check", responses={413: {"description": "Request body too large"}})
async def check_work(body: CheckRequest, project_id: ProjectId, user: CurrentUser, state: State) -> list[dict[str, Any]]:
    """"Check my work": each open assignment graded on the devices now, as the caller (an attempt each)."""
    return await teaching_of(state).check_work(learner(state, user), project_id, body.assignment_id)


@router.post("/projects/{project_id}/teaching/assignments/{assignment_id}/hint",
             responses={409: {"description": "Every hint was served"}})
async def hint(assignment_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> dict[str, Any]:
    """The caller's next hint level of the assignment (served in order, counted)."""
    return await teaching_of(state).hint(learner(state, user), project_id, assignment_id)


@router.post("/projects/{project_id}/teaching/assignments/{assignment_id}/close", status_code=204,
             responses={403: {"description": "Not a teacher of this project"}})
async def close(assignment_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> Response:
    """End an assignment (teachers only); its faults stay until reverted through ``.../faults``."""
    await teaching_of(state).close(learner(state, user), project_id, assignment_id, user.is_superadmin)
    return Response(status_code=204)


@router.get("/projects/{project_id}/teaching/results")
async def results(project_id: ProjectId, user: CurrentUser, state: State) -> dict[str, Any]:
    """Attempts, scores, hints used, time: every student's for a teacher, the caller's own otherwise."""
    return await teaching_of(state).results(learner(state, user), project_id, user.is_superadmin)


@router.get("/projects/{project_id}/teaching/results.csv", response_class=Response,
            responses={200: {"content": {"text/csv": {}}}, 403: {"description": "Not a teacher of this project"}})
async def results_csv(project_id: ProjectId, user: CurrentUser, state: State) -> Response:
    """The results as CSV (teachers only)."""
    text = await teaching_of(state).results_csv(learner(state, user), project_id, user.is_superadmin)
    return Response(text, media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="results-{project_id}.csv"'})
