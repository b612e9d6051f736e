"""The graded labs as copilot tools: a student's "check my work", and a teacher's agent's tools over MCP.

``gns3_check_work`` is offered to an agent run only when its project has an open
assignment (the tool-offer tiers of small windows are not touched otherwise). It
grades the caller's lab exactly as ``POST .../teaching/check`` does (an attempt
recorded, the student's view: each check's kind, device and pass or fail) and, on
request, serves the next hint. It is read-only: it reads devices, changes nothing.

Over MCP (:func:`teaching_tools`) a teacher's agent also gets ``gns3_lab_scenarios``
(the catalogue, as anyone may read it), ``gns3_lab_assign`` (flagged
``needs_confirmation``: it changes devices, so MCP asks the user's approval first)
and ``gns3_lab_results`` (every student's for a teacher, one's own otherwise). The
service decides who is a teacher (GNS3's ``Project.Modify``), whatever the tool.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from ..errors import CopilotError
from ..tools.errors import ToolError
from .service import Learner, TeachingService

__all__ = ["CHECK_WORK", "AssignLabTool", "CheckWorkTool", "LabResultsTool", "ScenariosTool", "teaching_tools"]

CHECK_WORK = "gns3_check_work"


class CheckWorkInput(BaseModel):
    hint: bool = Field(False, description="Also give the student's next hint.")


class _TeachingTool(BaseTool):
    service: TeachingService = Field(exclude=True)
    learner: Learner = Field(exclude=True)
    project_id: str
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - the gate calls tools asynchronously
        raise NotImplementedError(f"{self.name} runs asynchronously")


class CheckWorkTool(_TeachingTool):
    """Grade the student's assigned lab now; optionally the next hint."""

    name: str = CHECK_WORK
    description: str = (
        "Check the student's work on the lab assigned in this project: a score and each check's pass or fail. "
        "hint=true also returns the next hint. Never reveals the solution."
    )
    args_schema: type[BaseModel] = CheckWorkInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})

    async def _arun(self, hint: bool = False, **_: Any) -> dict[str, Any]:
        try:
            graded = await self.service.check_work(self.learner, self.project_id)
            result: dict[str, Any] = {"assignments": graded}
            if hint:
                result["hints"] = [await self._hint(g["assignment_id"]) for g in graded if g["score"] < 100.0]
        except CopilotError as exc:
            raise ToolError(exc.public_message) from exc
        return result

    async def _hint(self, assignment_id: str) -> dict[str, Any]:
        try:
            return await self.service.hint(self.learner, self.project_id, assignment_id)
        except CopilotError as exc:
            return {"assignment_id": assignment_id, "hint": None, "why": exc.public_message}


class NoInput(BaseModel):
    """No arguments."""


class ScenariosTool(_TeachingTool):
    name: str = "gns3_lab_scenarios"
    description: str = "List the graded-lab scenarios a teacher may assign: id, title, level, topic, roles."
    args_schema: type[BaseModel] = NoInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})

    async def _arun(self, **_: Any) -> dict[str, Any]:
        return {"scenarios": scenario_summaries(self.service)}


class AssignInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenario_ids: list[str] = Field(default_factory=list, max_length=20, description="Scenarios to assign.")
    level: str | None = Field(None, description="ccna or ccnp: draw count scenarios of that level instead")
    count: int = Field(1, ge=1, le=20)
    seed: int | None = Field(None, description="The same seed draws the same scenarios.")
    nodes: dict[str, str] = Field(default_factory=dict, description="role -> node name (else matched by family)")
    params: dict[str, str] = Field(default_factory=dict)
    time_limit_minutes: int | None = Field(None, ge=1, le=600)


class AssignLabTool(_TeachingTool):
    name: str = "gns3_lab_assign"
    description: str = (
        "Assign graded-lab scenarios to the project (teachers only): the faults are injected on the devices. "
        "Needs the user's approval."
    )
    args_schema: type[BaseModel] = AssignInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"needs_confirmation": True})

    async def _arun(self, **args: Any) -> dict[str, Any]:
        try:
            return {"assignments": await self.service.assign_and_show(self.learner, self.project_id, **args)}
        except (CopilotError, ValueError) as exc:
            raise ToolError(exc.public_message if isinstance(exc, CopilotError) else str(exc)) from exc


class LabResultsTool(_TeachingTool):
    name: str = "gns3_lab_results"
    description: str = (
        "The graded-lab results of the project: attempts, scores, hints used and time of every student "
        "(teachers), or your own."
    )
    args_schema: type[BaseModel] = NoInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})

    async def _arun(self, **_: Any) -> dict[str, Any]:
        return await self.service.results(self.learner, self.project_id)


def scenario_summaries(service: TeachingService) -> list[dict[str, Any]]:
    """The catalogue as anyone may read it: never a fault, its fix, its checks or its hints."""
    return [{"id": s.id, "title": s.title, "level": s.level, "topic": s.topic,
             "roles": {r: role.family for r, role in s.roles.items()}, "params": sorted(s.params),
             "time_limit_minutes": s.time_limit_minutes} for s in service.catalogue.scenarios.values()]


def teaching_tools(service: TeachingService, learner: Learner, project_id: str) -> list[BaseTool]:
    """Every graded-lab tool (MCP offers them all; an agent run only ``gns3_check_work``)."""
    return [cls(service=service, learner=learner, project_id=project_id)
            for cls in (CheckWorkTool, ScenariosTool, AssignLabTool, LabResultsTool)]
