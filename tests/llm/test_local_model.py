"""The packaged local model (strataflow/llm/local_model.py) without the localmodel extra: its assembly from
small part packages made here (standing in for the model's slices, with their own size and SHA-256), how its
runtime is started (loopback unless given a key), a runtime that dies at its first token (a stand-in process
that does), and the hashed requirements files against the extras."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from strataflow.errors import UserError
from strataflow.llm import local_model
from strataflow.llm.local_server import MODEL_API_KEY_ENV


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
    model = local_model.PackagedModel(
        "m", "m.gguf", names, len(whole), hashlib.sha256(whole).hexdigest(), "x"
    )

    path = local_model.assemble(tmp_path / "home", model)

    assert path == tmp_path / "home" / "models" / "m.gguf"
    assert path.read_bytes() == whole
    assert [p.name for p in path.parent.iterdir()] == ["m.gguf"], "no partial file left"
    mtime = path.stat().st_mtime_ns
    assert local_model.assemble(tmp_path / "home", model) == path and path.stat().st_mtime_ns == mtime, (
        "reused"
    )


def test_parts_that_do_not_match_the_pinned_hash_are_refused_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names, whole = _parts(tmp_path / "site", "fakemodel_bad")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = local_model.PackagedModel("m", "m.gguf", names, len(whole), "0" * 64, "x")

    with pytest.raises(UserError, match="not the pinned"):
        local_model.assemble(tmp_path / "home", model)
    assert list((tmp_path / "home" / "models").iterdir()) == []


def test_a_missing_part_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = local_model.PackagedModel(
        "m", "m.gguf", ("no_such_model_part_package",) * 6, 1, "0" * 64, "localmodel"
    )
    with pytest.raises(UserError, match=r"localmodel"):
        local_model.assemble(tmp_path / "home", model)


def _fake_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve_command checks that the runtime is installed; CI does not install the localmodel extra."""
    monkeypatch.setattr(local_model, "runtime_installed", lambda: True)


def test_the_runtime_is_llama_cpps_own_server_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_runtime(monkeypatch)
    command = local_model.serve_command(tmp_path / "m.gguf", "127.0.0.1", 8088)
    assert (
        command.argv[1:3] == ["-m", "strataflow.llm.local_server"]
        and command.url == "http://127.0.0.1:8088/v1"
    )
    assert command.argv[command.argv.index("--alias") + 1] == local_model.MODEL_ID
    assert command.env == {}


def test_serving_beyond_loopback_needs_a_key_which_never_goes_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_runtime(monkeypatch)
    for host in ("0.0.0.0", "192.0.2.7", "::"):
        with pytest.raises(UserError, match="API key"):
            local_model.serve_command(tmp_path / "m.gguf", host, 8088)
    command = local_model.serve_command(tmp_path / "m.gguf", "0.0.0.0", 8088, api_key="k-123456")
    assert command.env == {MODEL_API_KEY_ENV: "k-123456"} and "k-123456" not in " ".join(command.argv)
    assert local_model.is_loopback("::1") and local_model.is_loopback("localhost")


def test_without_the_runtime_serving_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "RUNTIME", "no-such-runtime==1")
    monkeypatch.setattr(local_model, "runtime_installed", lambda: False)
    with pytest.raises(UserError, match=r"no-such-runtime==1.*localmodel"):
        local_model.serve_command(tmp_path / "m.gguf", "127.0.0.1", 8088)


CRASHING_RUNTIME = """
import http.server, json, os, signal, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        os.kill(os.getpid(), signal.SIGSEGV)  # what a llama.cpp built for another CPU does at its first token
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_a_runtime_that_dies_at_its_first_token_is_explained_with_the_fix(tmp_path: Path) -> None:
    """wait_ready asks for one token after the model is listed: the runtime that lists its model and then
    dies (llama.cpp compiled with -march=native on a VM reporting AMX) is named, with the reinstall."""
    script = tmp_path / "runtime.py"
    script.write_text(CRASHING_RUNTIME)
    port = local_model.free_port()
    command = local_model.ServeCommand(
        [sys.executable, str(script), str(port)], f"http://127.0.0.1:{port}/v1", "m"
    )
    process = local_model.start(command, subprocess.DEVNULL)  # type: ignore[arg-type]
    try:
        with pytest.raises(UserError, match="SIGSEGV while answering its first token") as raised:
            local_model.wait_ready(command, process, timeout_s=60)
    finally:
        local_model.stop(process)
    assert local_model.RUNTIME in str(raised.value) and "--force-reinstall" in str(raised.value)


def _pins(text: str) -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+==[^\s\\]+)", text, re.MULTILINE))


@pytest.mark.parametrize(
    ("extra", "model"), [("localmodel", local_model.QWEN_05B), ("localmodel-1.5b", local_model.QWEN_15B)]
)
def test_the_hashed_requirements_pin_what_the_extra_pins_and_hash_every_wheel(
    extra: str, model: local_model.PackagedModel
) -> None:
    root = Path(__file__).parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    hashed = (root / "requirements" / f"{extra}.txt").read_text()
    assert _pins(hashed) == set(extras[extra]) and local_model.RUNTIME in extras[extra]
    entries = [e for e in re.split(r"\n(?=[A-Za-z])", hashed.split("\n--only-binary xllamacpp\n", 1)[1]) if e]
    assert all(re.search(r"--hash=sha256:[0-9a-f]{64}", e) for e in entries) and len(entries) == len(
        extras[extra]
    )
    parts = {p.split("==")[0].replace("-", "_") for p in extras[extra] if "part" in p}
    assert parts == set(model.part_packages), "the extra installs the parts the module assembles"
