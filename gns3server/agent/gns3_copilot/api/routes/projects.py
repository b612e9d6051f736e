"""``GET /v3/copilot/projects``: the projects the user may open in the panel's project picker.

GNS3 3.0's own list is empty for a user whose role is granted project by project
(a student's lab); this one holds exactly the projects GNS3 lets the user read
(see ``api/projects.py``), in GNS3's own shape.
"""

from __future__ import annotations

from fastapi import APIRouter
from gns3server import schemas as gns3_schemas

from ..dependencies import CurrentUser, State

router = APIRouter()


@router.get("/projects", response_model=list[gns3_schemas.Project])
async def list_projects(user: CurrentUser, state: State) -> list[dict[str, object]]:
    """The projects GNS3 lets this user read (``Project.Audit`` on each), by name."""
    return await state.projects.of_user(user.user_id)
