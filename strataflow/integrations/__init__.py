"""Adapters for the clients agent developers already use (a LangGraph store, ...), over the HTTP API."""
