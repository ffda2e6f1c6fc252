"""The service is an app above the stage library, never above Prefect: importing it (and the routes that run
save_info, which uses the extraction stage) loads no Prefect module. Prefect's logging setup would otherwise
reset uvicorn's access log the first time a route imported it."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_service_and_its_routes_loads_no_prefect() -> None:
    code = (
        "import sys, strataflow.service.app, strataflow.service.mcp_server, strataflow.pipeline.save_info; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('prefect', 'tasks', 'flows')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
