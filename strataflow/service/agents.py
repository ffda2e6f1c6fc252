"""The agent a request acts as, for the routes that take an agent id in their own shape (the mem0-compatible
API's agent_id, the LangGraph store's agent): Caller.agent_for, the one rule (a key bound to an agent acts
only as that agent, and a request naming another one gets 403; any other key acts as the agent the request
names, or as none: no agent's private entries)."""

from __future__ import annotations

from strataflow.service.keys import Caller


def bound_agent(caller: Caller) -> str | None:
    """The agent the caller's key is bound to, if any."""
    return caller.agent


def acting_agent(caller: Caller, requested: str | None) -> str | None:
    """The key's own agent (another one requested: 403), else the requested one, else None."""
    return caller.agent_for(requested)
