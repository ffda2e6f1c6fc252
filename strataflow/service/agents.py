"""The agent a request acts as, for the routes that take an agent id in their own shape (the mem0-compatible
API's agent_id, the LangGraph store's agent): a key bound to an agent acts only as that agent (a request
naming another one gets 403), any other key as the agent the request names, or as none (no agent's private
entries: the one visibility rule of strataflow.memory.api)."""

from __future__ import annotations

from strataflow.service.errors import ApiError
from strataflow.service.keys import Caller


def bound_agent(caller: Caller) -> str | None:
    """The agent the caller's key is bound to, if any."""
    agent: str | None = getattr(caller, "agent", None)
    return agent


def acting_agent(caller: Caller, requested: str | None) -> str | None:
    """The key's own agent (another one requested: 403), else the requested one, else None."""
    bound = bound_agent(caller)
    if bound is not None and requested not in (None, bound):
        raise ApiError(
            403, f"key {caller.key_name!r} is bound to agent {bound!r}; it cannot act as agent {requested!r}"
        )
    return bound if bound is not None else requested
