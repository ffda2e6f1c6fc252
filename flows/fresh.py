"""The fresh flow: memory within two minutes of a posted message, as Prefect runs.

An accepted online write (POST /v1/messages, mem0 add) emits the Prefect event `strataflow.messages.received`
with the namespace as its resource (strataflow/ops/freshness.py). The `fresh` deployment of prefect.yaml has
an event trigger on it, one bucket per namespace: the first event fires a run for its namespace at once, and
the events of the next few seconds (the trigger's `within`, shorter than a run takes to start) are gathered
into that run, which reads the namespace's messages when it starts. The run extracts L2 from exactly the
scopes with messages past their extraction watermark in that namespace (the ones that received messages),
refreshes their hot memory and embeds the new items. The stages are the nightly's and the incremental's
tasks, so they share the per-scope locks and watermarks: no message is extracted twice, whichever flow comes
first.
"""

from __future__ import annotations

from prefect import flow

from models.params import RunSummary
from strataflow.config import load_settings
from strataflow.ops.flow_runner import configured_task_runner
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.concurrency import fan_out, llm_slot
from tasks.embed import embed_pending_task
from tasks.extract import extract_new_task
from tasks.hot_memory import refresh_hot_memory_task


@flow(
    name="fresh",
    task_runner=configured_task_runner(),
    on_failure=[mark_run_failed],
    on_crashed=[mark_run_failed],
)
def fresh(namespace: str) -> RunSummary:
    """Extract L2 and refresh hot memory for the scopes of namespace that received messages; embed the
    new items."""
    settings = load_settings()
    run_id = begin_run(settings, "fresh", {"namespace": namespace}, namespace)
    with llm_slot(settings):
        scope = {"run_id": run_id, "namespace": namespace}
        extracted = fan_out(extract_new_task, settings, "extract-new", **scope)
        hot = fan_out(refresh_hot_memory_task, settings, "refresh-hot-memory", **scope)
    embedded = embed_pending_task(settings, namespace=namespace)
    stages = {"extract": extracted, "hot_memory": hot, "embed": [embedded]}
    return finish_run(settings, "fresh", run_id, stages)
