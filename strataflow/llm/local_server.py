"""`python -m strataflow.llm.local_server`: llama.cpp's own OpenAI-compatible server for one GGUF file.

The runtime of the `localmodel` extra is xllamacpp: llama.cpp's server (`llama-server`: /v1/models,
/v1/chat/completions with `response_format` `json_schema`, prompt caching, API keys) built as a prebuilt
manylinux2014 wheel for a common x86-64 baseline (AVX2, no AVX-512 or AMX), so it installs without a
compiler in seconds and runs on any x86-64 CPU of the last decade. This module only sets its parameters and
keeps it running until SIGTERM or SIGINT; `strataflow model serve` (strataflow/llm/local_model.py) starts it
as a child process, waits for its first token and explains a crash.

The API key, when there is one, comes from the environment (MODEL_API_KEY_ENV), never from the command line,
which every user of the machine can read.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

MODEL_API_KEY_ENV = "STRATAFLOW_MODEL_API_KEY"
SLOTS = 1  # a CPU server answers one request at a time; one slot keeps the whole context for it


def server_params(xllamacpp: Any, args: argparse.Namespace) -> Any:
    """llama.cpp's server parameters (common_params) for the arguments."""
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = SLOTS
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.ui = False  # an API, not a chat page
    params.endpoint_slots = False  # /slots shows the prompts being processed
    params.cors_origins = ""  # no web page may call it from a browser (the default lets every origin)
    key = os.environ.get(MODEL_API_KEY_ENV)
    if key:
        params.api_keys = [key]
    return params


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model id /v1/models lists and requests name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, required=True, help="context tokens")
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args(argv)
    import xllamacpp  # the localmodel extra; imported here so that --help works without it

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xllamacpp.Server(server_params(xllamacpp, args))  # loads the model, then listens
    print(f"listening at {server.listening_address}", file=sys.stderr, flush=True)
    stop.wait()
    # llama.cpp's server would wait for the request in flight to end, however long that takes; it holds
    # nothing that needs saving (the model is mapped read-only, the KV cache is scratch)
    print("stopped", file=sys.stderr, flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
