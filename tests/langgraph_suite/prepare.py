"""LangGraph's own PostgresStore test files, run against StrataflowStore: the files are read from a langgraph
checkout (libs/checkpoint-postgres/tests: test_store.py, test_async_store.py, embed_test_utils.py; fetched,
never committed here) and written to a directory of their own with the test bodies byte for byte as they are.
Only what points the tests at PostgresStore changes: its imports, and the fixtures and helpers that build one
(`store`, `vector_store`, `_create_vector_store`, `_create_pool_store`), which come from support.py instead
and build a StrataflowStore over a live strataflow API, one namespace per test.

NOT_APPLICABLE names the tests that read PostgresStore itself (its SQL, its schema, its sweeper thread, its
connection pool) or the exact numbers of LangGraph's test embedder, each with why; they are deselected and
counted as not applicable.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

FILES = ("test_store.py", "test_async_store.py")
BUILDERS = {"store", "vector_store", "_create_vector_store", "_create_pool_store"}
POSTGRES_IMPORTS = ("psycopg", "langgraph.store.postgres", "langgraph.checkpoint.postgres", "tests.conftest")
SUPPORT = Path(__file__).with_name("support.py")

EXPIRED_ROWS = (
    "backdates rows of PostgresStore's `store` table through store._cursor() and switches its sweeper "
    "thread and omit_expired flag; strataflow has no sweeper and always omits an expired item "
    "(memory_items.expires_at, checked in SQL by every read), which test_store_contract covers"
)
NOT_APPLICABLE = {
    "test_store.py::test_escape_like_literal": "tests PostgresStore's private LIKE escaping of its "
    "dot-joined prefix column; strataflow compares namespace labels by position, with no LIKE pattern",
    "test_store.py::test_namespace_match_pattern": "tests PostgresStore's private regex builder for its "
    "dot-joined prefix column",
    "test_store.py::test_nonnull_migrations": "reads PostgresStore.MIGRATIONS, its own SQL schema",
    "test_store.py::test_scores": "asserts a score equals the raw cosine / inner product / -L2 distance of "
    "LangGraph's CharacterEmbeddings test vectors; strataflow embeds with the server's model (one space for "
    "every surface) and scores with its one ranking, 0..1, so the numbers differ by design",
    "test_store.py::test_omit_expired_filters_read_paths": EXPIRED_ROWS,
    "test_store.py::test_omit_expired_disabled_preserves_expired_rows": EXPIRED_ROWS,
    "test_store.py::test_omit_expired_refresh_ttl_only_refreshes_live_rows": EXPIRED_ROWS,
    "test_store.py::test_omit_expired_search_pagination": EXPIRED_ROWS,
    "test_async_store.py::test_abatch_uses_single_pool_checkout": "counts the checkouts of PostgresStore's "
    "connection pool (langgraph.checkpoint.postgres._ainternal); the store holds no database connection",
    "test_async_store.py::test_omit_expired_filters_read_paths": EXPIRED_ROWS,
    "test_async_store.py::test_omit_expired_disabled_preserves_expired_rows": EXPIRED_ROWS,
    "test_async_store.py::test_omit_expired_refresh_ttl_only_refreshes_live_rows": EXPIRED_ROWS,
    "test_async_store.py::test_omit_expired_search_pagination": EXPIRED_ROWS,
}
PYTEST_INI = """[pytest]
addopts = -p anyio -p no:cacheprovider
filterwarnings = ignore
"""
CONFTEST = '''"""Coroutine tests run on asyncio through anyio's plugin (LangGraph's: asyncio_mode=auto)."""

import inspect

import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


def pytest_collection_modifyitems(items):
    for item in items:
        if inspect.iscoroutinefunction(getattr(item, "function", None)):
            item.add_marker(pytest.mark.anyio)
'''


def prepare(source: Path, target: Path) -> list[str]:
    """Write the runnable suite from a langgraph checkout's tests directory into target; the file names."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "embed_test_utils.py", target / "embed_test_utils.py")
    shutil.copyfile(SUPPORT, target / "lg_support.py")
    (target / "pytest.ini").write_text(PYTEST_INI)
    (target / "conftest.py").write_text(CONFTEST)
    written = []
    for name in FILES:
        if (source / name).exists():
            flavour = "async" if name.startswith("test_async") else "sync"
            (target / name).write_text(pointed_at_strataflow((source / name).read_text(), flavour))
            written.append(name)
    return written


def pointed_at_strataflow(text: str, flavour: str) -> str:
    """The test file with its PostgresStore imports and store builders taken out and support.py's in: every
    other line, the test bodies included, as it was."""
    lines = text.splitlines(keepends=True)
    dropped: set[int] = set()
    for node in ast.parse(text).body:
        drop = False
        if isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            drop = any(n == p or n.startswith(p + ".") for n in names for p in POSTGRES_IMPORTS)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            drop = node.name in BUILDERS
        if drop:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            dropped.update(range(first - 1, node.end_lineno or node.lineno))
    kept = "".join(line for i, line in enumerate(lines) if i not in dropped)
    support = (
        "from lg_support import DEFAULT_URI, VECTOR_TYPES, CharacterEmbeddings, fake_embeddings  # noqa\n"
        f"from lg_support import {flavour}_store, {flavour}_vector_store  # noqa\n"
        f"from lg_support import {flavour}_create_vector_store as _create_vector_store  # noqa\n"
    )
    if flavour == "async":  # marked when collected: anyio keeps the tests' own parametrize (vector_type)
        support += "import pytest as _pytest  # noqa\npytestmark = _pytest.mark.anyio\n"
    head, _, body = kept.partition("\nimport ")
    return f"{head}\n{support}import {body}" if body else support + kept
