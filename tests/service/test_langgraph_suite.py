"""LangGraph's own store test files against StrataflowStore (tests/langgraph_suite): run when
LANGGRAPH_TESTS names a langgraph checkout's libs/checkpoint-postgres/tests directory (fetched, never
committed here; CI has none, and tests/service/test_store_contract.py ports their contract points). The
counts per file (passed, failed, not applicable with why) go to LANGGRAPH_SUITE_REPORT (default
langgraph-suite.json in the session's STRATAFLOW_HOME) and are printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.langgraph_suite.prepare import NOT_APPLICABLE, prepare

SOURCE = os.environ.get("LANGGRAPH_TESTS")


@pytest.mark.skipif(not SOURCE, reason="LANGGRAPH_TESTS names no langgraph checkout's store tests")
def test_langgraph_store_test_files_pass_against_strataflow(
    api_url: str, strataflow_home: Path, tmp_path: Path
) -> None:
    assert SOURCE is not None
    suite = tmp_path / "langgraph_store_tests"
    files = prepare(Path(SOURCE), suite)
    assert files, f"no test_store.py or test_async_store.py in {SOURCE}"
    env = {**os.environ, "LG_SUITE_API": api_url, "STRATAFLOW_HOME": str(strataflow_home)}
    report: dict[str, dict[str, object]] = {}
    for name in files:
        deselect = [arg for test in NOT_APPLICABLE if test.startswith(name) for arg in ("--deselect", test)]
        junit = tmp_path / f"{name}.xml"
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rN", name, f"--junitxml={junit}", *deselect],
            cwd=suite, env=env, capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        deselected = re.search(r"(\d+) deselected", run.stdout)
        cases = ElementTree.parse(junit).getroot().iter("testcase")
        outcome: dict[str, str] = {}
        for case in cases:
            failed = case.find("failure") if case.find("failure") is not None else case.find("error")
            skipped = case.find("skipped")
            state = "failed" if failed is not None else "skipped" if skipped is not None else "passed"
            outcome[f"{case.get('name')}"] = (
                state if failed is None else f"failed: {failed.get('message', '')[:300]}"
            )
        report[name] = {
            "passed": sum(v == "passed" for v in outcome.values()),
            "failed": {k: v for k, v in outcome.items() if v.startswith("failed")},
            "skipped": sorted(k for k, v in outcome.items() if v == "skipped"),
            "not_applicable": {
                "count": int(deselected.group(1)) if deselected else 0,
                "tests": {k.split("::")[1]: v for k, v in NOT_APPLICABLE.items() if k.startswith(name)},
            },
        }
    out = Path(os.environ.get("LANGGRAPH_SUITE_REPORT", strataflow_home / "langgraph-suite.json"))
    out.write_text(json.dumps(report, indent=2))
    print(
        json.dumps(
            {
                f: {
                    k: (len(v) if k in ("failed", "skipped") else v)
                    for k, v in r.items()
                    if k != "not_applicable"
                }
                | {"not_applicable": r["not_applicable"]["count"]}
                for f, r in report.items()
            }
        )
    )  # type: ignore[index]
    assert all(not r["failed"] and not r["skipped"] for r in report.values()), json.dumps(report, indent=2)
