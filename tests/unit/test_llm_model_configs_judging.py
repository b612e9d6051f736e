"""Whose rights judge an LLM endpoint saved through 3.1's model-config routes."""

from __future__ import annotations

from gns3server.agent.gns3_copilot.api.routes.llm_model_configs import _judged_as
from gns3server.agent.gns3_copilot.service.copilot import User

ADMIN = User("u-admin", "admin", "t", is_superadmin=True)
ALICE = User("u-alice", "alice", "t")


def test_an_endpoint_is_judged_as_it_will_be_when_the_config_runs() -> None:
    # An administrator's config for a user runs with that user's rights (judged again at each chat).
    assert _judged_as(ADMIN, ALICE.user_id).is_superadmin is False
    assert _judged_as(ADMIN, ALICE.user_id).user_id == ADMIN.user_id  # still the caller who saves it
    # Their own, and a group's (the administrator's choice, not judged again at run): their rights.
    assert _judged_as(ADMIN, ADMIN.user_id) is ADMIN
    assert _judged_as(ADMIN, "group:g1") is ADMIN
    assert _judged_as(ALICE, ALICE.user_id) is ALICE
