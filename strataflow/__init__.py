"""strataflow: scheduled memory pipeline for LLM agents (Prefect + PostgreSQL/pgvector)."""

__version__ = "0.1.0"
