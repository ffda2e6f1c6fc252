"""Retrieval: hybrid search and ranking, query intent and the context builder."""
