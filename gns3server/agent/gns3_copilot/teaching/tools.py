"""``gns3_check_work``: a student's "check my work" from the chat, offered only where a lab is assigned.

Offered to a run only when its project has an open assignment (the tool-offer tiers
of small windows are not touched otherwise). It grades the caller's lab exactly as
``POST .../teaching/check`` does (an attempt recorded, the student's view: each check's
kind, device and pass or fail) and, on request, serves the next hint. It is read-only:
it reads devices with show commands, and changes nothing on them.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from ..errors import CopilotError
from ..tools.errors import ToolError
from .service import Learner, TeachingService

__all__ = ["CHECK_WORK", "CheckWorkTool"]

CHECK_WORK = "gns3_check_work"


class CheckWorkInput(BaseModel):
    hint: bool = Field(False, description="Also give the student's next hint.")


class CheckWorkTool(BaseTool):
    """Grade the student's assigned lab now; optionally the next hint."""

    name: str = CHECK_WORK
    description: str = (
        "Check the student's work on the lab assigned in this project: a score and each check's pass or fail. "
        "hint=true also returns the next hint. Never reveals the solution."
    )
    args_schema: type[BaseModel] = CheckWorkInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})
    service: TeachingService = Field(exclude=True)
    learner: Learner = Field(exclude=True)
    project_id: str
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - the graph calls tools asynchronously
        raise NotImplementedError("gns3_check_work runs asynchronously")

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
