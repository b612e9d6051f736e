"""``POST /v3/copilot/reload/skills`` (GNS3 3.1's name): read the prompt files again, no restart."""

from __future__ import annotations

from fastapi import APIRouter

from ..dependencies import CurrentUser, State
from ..errors import AdminOnlyError
from ..schemas import ReloadResult

router = APIRouter()


@router.post(
    "/reload/skills",
    response_model=ReloadResult,
    responses={403: {"description": "Only a GNS3 superadmin may reload"},
               422: {"description": "A prompt file cannot be used (the message names it); nothing changed"}},
)
async def reload_skills(user: CurrentUser, state: State) -> ReloadResult:
    """Reload the system prompts from the ``[Copilot] prompts_dir`` files (else the packaged ones);
    runs started afterwards use them."""
    if not user.is_superadmin:
        raise AdminOnlyError("Only administrators can reload skills")
    prompts = await state.reload_prompts()
    return ReloadResult(sources=prompts.sources)
