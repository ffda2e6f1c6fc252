"""Session fixtures: one embedded PostgreSQL (migrated once), settings pointing at it, and a Prefect harness.

Tests that call code which commits use a namespace of their own (the `namespace` fixture) so they never
see each other's rows; tests of plain functions use `conn`, rolled back at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine

# Before anything imports litellm, prefect or the model: offline, quiet, no telemetry.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
for _var in ("DATABASE_URL", "STRATAFLOW_DATABASE_URL", "PREFECT_API_URL"):
    os.environ.pop(_var, None)

from strataflow.config import Settings, load_settings  # noqa: E402
from strataflow.database import dispose_engines, engine_for  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def strataflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("strataflow-home")
    os.environ["STRATAFLOW_HOME"] = str(home)
    os.environ["PREFECT_HOME"] = str(home / "prefect")
    yield home
    from strataflow import embedded

    dispose_engines()
    embedded.stop(home)


@pytest.fixture(scope="session")
def settings(strataflow_home: Path) -> Settings:
    return load_settings(home=strataflow_home)


@pytest.fixture(scope="session")
def engine(settings: Settings) -> Engine:
    from strataflow import migrations

    engine = engine_for(settings)
    migrations.upgrade(engine)  # the same code path as `strataflow db upgrade`
    dispose_engines()  # drop connections opened before the vector type existed (no pgvector adapter on them)
    return engine_for(settings)


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        tx = conn.begin()
        yield conn
        tx.rollback()


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses, for code that commits."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def prefect_harness(strataflow_home: Path) -> Iterator[None]:
    """One Prefect test server for the whole session (request it in flow tests)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=None):
        yield


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    path = SHARED_DATA / "locomo" / "locomo_dev3.json"
    if not path.exists():
        pytest.fail(f"LoCoMo dev set not found at {path}: ../shared must sit beside the repository")
    return path
