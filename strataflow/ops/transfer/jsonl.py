"""The export file on disk: one JSON object per line (gzip when the name ends in .gz), written to a private
temporary file beside the target and renamed into place when complete, read back with line numbers."""

from __future__ import annotations

import base64
import gzip
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import orjson

from models.transfer import Embedding
from strataflow.llm.embeddings import as_vector


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to an export line")


def dumps(line: dict[str, Any]) -> bytes:
    """One line: compact JSON (times with their offset, UUIDs and dates as text) and a newline."""
    return orjson.dumps(line, default=_default, option=orjson.OPT_APPEND_NEWLINE)


def embedding_of(vector: Any, model: str | None) -> dict[str, Any] | None:
    """A stored vector as an export value ({model, dim, f32}); None for none."""
    if vector is None:
        return None
    values = as_vector(vector).astype("<f4")
    encoded = base64.b64encode(values.tobytes()).decode("ascii")
    return {"model": model or "unknown", "dim": int(values.size), "f32": encoded}


def vector_of(embedding: Embedding | None, dim: int) -> np.ndarray | None:
    """The vector of an export value when it has the target's size (None otherwise: left for embed)."""
    if embedding is None or embedding.dim != dim:
        return None
    return np.frombuffer(base64.b64decode(embedding.f32), dtype="<f4").astype(np.float32)


@contextmanager
def written_file(path: Path) -> Iterator[IO[bytes]]:
    """A binary stream into a private (0600) temporary file beside path, renamed to path when the block
    ends without an error and removed when it fails; gzip-compressed when path ends in .gz."""
    path = path.expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=folder)
    try:
        with os.fdopen(handle, "wb") as raw:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw, mode="wb", filename="") as stream:
                    yield cast(IO[bytes], stream)
            else:
                yield raw
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line without its newline) of a file (gzip when its name ends in .gz); blank
    lines are skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        for number, raw in enumerate(stream, start=1):
            line = raw.rstrip(b"\r\n")
            if line.strip():
                yield number, line
