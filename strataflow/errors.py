"""Errors a user can fix, shared by every layer: the CLI prints the message without a traceback, exit 1."""

from __future__ import annotations


class UserError(RuntimeError):
    """An error the user can fix (a bad argument, a missing file, an unknown flow); the message says how."""
