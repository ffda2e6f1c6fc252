"""Thin Prefect tasks over the stage library, one module per stage.

Importing this package connects the library to Prefect in this process (the library never imports Prefect
itself, apart from the run recorder's Prefect side: pyproject.toml's import contracts): the stages log to
the run's log in Prefect's UI, a run found crashed is marked Crashed in Prefect too
(strataflow.pipeline.prefect_runs), and models' requests per minute are Prefect limits (tasks/rate_limits.py).
"""

from strataflow.pipeline import prefect_runs
from tasks import rate_limits

prefect_runs.install()
rate_limits.install()
