"""The policies on the agent's calls: approval of device changes, the loop guard, argument cutting, modes."""
