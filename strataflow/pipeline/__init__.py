"""The stage library: each pipeline stage as a plain function with typed inputs and outputs (ingest, embed,
extract, hot memory, rollup, reflect, expire, forget, assets), its SQL and prompts, the run recorder, scope
discovery and watermarks. No Prefect at module level: tasks/ wraps these functions, and the CLI, the service
and the benchmarks call them directly."""
