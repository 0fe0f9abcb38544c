"""Device and precision logic, proved on the CPU: resolution, clean failures, dtype in model and
fingerprint, batch plans that restore order, and the out-of-memory fallback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embedscope.errors import ConfigError
from embedscope.models import device as dev
from embedscope.models.base import BaseEncoder
from embedscope.models.device import DeviceUnavailableError
from embedscope.testing.fakes import KeywordEncoder
from support.lazy import lazy_module

torch = lazy_module("torch")  # imported by the first test that uses it: collection imports nothing heavy
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
SRC = Path(__file__).resolve().parents[2] / "src" / "embedscope"


@pytest.fixture
def cpu_only(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_auto_resolves_to_cpu_without_an_accelerator(cpu_only):
    assert dev.resolve_device("auto") == "cpu"
    assert dev.resolve_device(None) == "cpu"
    assert dev.available_devices() == ["cpu"]


def test_auto_prefers_cuda_then_mps(two_gpus, monkeypatch):
    assert dev.resolve_device("auto") == "cuda:0"
    assert dev.resolve_device("cuda") == "cuda:0"
    assert dev.resolve_device("cuda:1") == "cuda:1"
    assert dev.resolve_devices("cuda:0,cuda:1") == ["cuda:0", "cuda:1"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert dev.resolve_device("auto") == "mps"


def test_absent_device_fails_saying_what_is_here(cpu_only):
    with pytest.raises(DeviceUnavailableError, match=r"'cuda:0' is not available here; this machine has: cpu"):
        dev.resolve_device("cuda")
    with pytest.raises(DeviceUnavailableError, match="mps"):
        dev.resolve_device("mps")


def test_gpu_index_out_of_range(two_gpus):
    with pytest.raises(DeviceUnavailableError, match=r"'cuda:2' .* cpu, cuda:0, cuda:1"):
        dev.resolve_device("cuda:2")
    with pytest.raises(ConfigError, match="named twice"):
        dev.resolve_devices("cuda:0,cuda:0")


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "cuda0", "auto,cpu", ""])
def test_malformed_devices_are_config_errors(bad):
    with pytest.raises(ConfigError):
        dev.resolve_devices(bad)


def test_dtypes():
    assert [dev.parse_dtype(d) for d in ("fp32", "FP16", "bf16", "float16", None)] == [
        "float32",
        "float16",
        "bfloat16",
        "float16",
        "float32",
    ]
    assert dev.torch_dtype("bf16") is torch.bfloat16
    with pytest.raises(ConfigError, match="fp32 .* fp16 or bf16"):
        dev.parse_dtype("int8")


def test_default_batch_size_per_device():
    assert dev.default_batch_size("cpu") == 32
    assert dev.default_batch_size("cuda:1") == dev.default_batch_size("mps") == 256


# -- out-of-memory fallback --------------------------------------------------------------------


class _OomBelow:
    """Raises torch's OutOfMemoryError for batches larger than ``limit``."""

    def __init__(self, limit: int, error: type[BaseException] | None = None) -> None:
        self.limit, self.error, self.sizes = limit, error or torch.cuda.OutOfMemoryError, []

    def __call__(self, size: int) -> int:
        self.sizes.append(size)
        if size > self.limit:
            raise self.error("CUDA out of memory. Tried to allocate 2.00 GiB")
        return size


def test_oom_halves_the_batch_until_it_fits(caplog):
    run = _OomBelow(40)
    assert dev.with_oom_halving(run, 256) == 32
    assert run.sizes == [256, 128, 64, 32]
    assert "retrying with batch size 32" in caplog.text


def test_oom_as_runtime_error_and_down_to_one():
    run = _OomBelow(0, RuntimeError)
    with pytest.raises(RuntimeError, match="out of memory"):
        dev.with_oom_halving(run, 8)
    assert run.sizes == [8, 4, 2, 1]


def test_other_errors_are_not_retried():
    calls = []

    def run(size: int) -> None:
        calls.append(size)
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        dev.with_oom_halving(run, 64)
    assert calls == [64]


class _BatchRecorder(BaseEncoder):
    """Records the batch sizes ``_encode`` is asked for; out of memory above 8 texts."""

    backend = "recorder"

    def __init__(self) -> None:
        self.name, self.revision, self.embed_dim, self.sizes = "rec", "r", 1, []
        self._place("cpu", None)

    def settings(self) -> dict:
        return {"backend": self.backend}

    def _encode(self, texts, role, batch_size, show_progress):
        self.sizes.append(batch_size)
        if batch_size > 8:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return np.array([[len(t)] for t in texts], dtype=np.float32)


def test_encoder_default_batch_and_oom_fallback(monkeypatch):
    enc = _BatchRecorder()
    assert enc.encode(["ab", "c"], role="query").ravel().tolist() == [2.0, 1.0]
    assert enc.sizes == [32, 16, 8]  # the CPU default, then halved twice
    enc.device, enc.sizes = "cuda:0", []
    enc.encode(["ab"], role="query")
    assert enc.sizes[0] == 256
    assert enc.encode([], role="document").shape == (0, 1)


# -- fingerprints, batch plans ------------------------------------------------------------------


def test_dtype_and_device_kind_are_in_the_fingerprint():
    a, b = KeywordEncoder(["x"]), KeywordEncoder(["x"])
    assert a.fingerprint == b.fingerprint
    b.dtype = "float16"
    assert a.fingerprint != b.fingerprint
    c = KeywordEncoder(["x"])
    c.device = "cuda:1"
    d = KeywordEncoder(["x"])
    d.device = "cuda:0"
    assert c.fingerprint != a.fingerprint and c.fingerprint == d.fingerprint  # the kind, not the index


def test_batch_plan_sorts_and_encode_sorted_restores_order():
    from embedscope.models.batching import encode_sorted

    texts = ["bb", "a", "dddd", "ccc", "ee", "f", "gggggg"]
    plan = BaseEncoder.batch_plan(KeywordEncoder(["x"]), [len(t) for t in texts], 3)
    assert plan == [[6, 2, 3], [0, 4, 1], [5]]  # longest first, ties in input order
    seen: list[list[str]] = []

    def batch_fn(batch):
        seen.append(batch)
        return np.array([[len(t), len(seen)] for t in batch], dtype=np.float32)

    out = encode_sorted(texts, batch_fn, batch_size=3)
    assert out[:, 0].tolist() == [len(t) for t in texts]  # rows back in input order
    assert seen == [[texts[i] for i in b] for b in plan]  # the batches are exactly the plan
    assert out[:, 1].tolist() == [2, 2, 1, 1, 2, 3, 1]


def test_sentence_transformers_plan_is_its_own_order():
    from embedscope.models.sentence_transformers_backend import st_order

    class Model:  # no flattening: plain argsort of negative lengths
        pass

    lengths = [3, 9, 3, 1, 9, 4]
    assert st_order(Model(), lengths) == np.argsort([-n for n in lengths]).tolist()


def test_no_backend_pins_a_device():
    """No call passes ``device="cpu"`` (the static backend's numpy lookup records its CPU, it pins nothing)."""
    keyword = re.compile(r"(?<![.\w])device=[\"']cpu[\"']")  # a keyword argument, not an attribute
    pinned = [
        f"{p.relative_to(SRC)}:{n}"
        for p in SRC.rglob("*.py")
        if "testing" not in p.parts
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if keyword.search(line) and ">>>" not in line
    ]
    assert pinned == []
    assert keyword.search('SentenceTransformer(path, device="cpu")')


@pytest.mark.slow
def test_cli_cuda_on_a_cpu_machine_fails_in_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "embedscope",
            "run",
            "--device",
            "cuda",
            "--model",
            "static-64",
            "--output-folder",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'cuda:0' is not available here; this machine has: cpu" in lines[0], proc.stderr
    assert "CPU build" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_run_help_documents_device_dtype_engine():
    proc = subprocess.run(
        [sys.executable, "-m", "embedscope", "run", "--help"], capture_output=True, text=True, timeout=60
    )
    for flag in ("--device", "--dtype", "--engine", "--ray-address", "--ray-gpus-per-worker", "fp16", "bf16"):
        assert flag in proc.stdout


def test_accelerator_kernels_run_the_same_torch_ops():
    """The dense top-k and MaxSim paths taken on an accelerator, run here with torch on ``cpu:0``."""
    from embedscope.retrieval.dense import top_k_search
    from embedscope.retrieval.late_interaction import maxsim_candidates, maxsim_top_k

    rng = np.random.default_rng(0)
    q = rng.standard_normal((7, 16)).astype(np.float32)
    chunks = [rng.standard_normal((n, 16)).astype(np.float32) for n in (30, 11)]
    cpu = top_k_search(q, chunks, top_k=5)
    acc = top_k_search(q, chunks, top_k=5, device="cpu:0")
    assert np.array_equal(cpu[0], acc[0]) and np.array_equal(cpu[1], acc[1])

    q_tok = [rng.standard_normal((n, 8)).astype(np.float32) for n in (3, 5, 4)]
    d_tok = [[rng.standard_normal((n, 8)).astype(np.float32) for n in (6, 2, 9, 4, 7)]]
    idx_cpu, s_cpu = maxsim_top_k(q_tok, d_tok, top_k=3)
    idx_acc, s_acc = maxsim_top_k(q_tok, d_tok, top_k=3, device="cpu:0")
    assert np.array_equal(idx_cpu, idx_acc) and np.allclose(s_cpu, s_acc, atol=1e-5)
    cand = np.array([[0, 2, -1], [4, 1, 3], [2, -1, -1]])
    a = maxsim_candidates(q_tok, d_tok[0], cand)
    b = maxsim_candidates(q_tok, d_tok[0], cand, device="cpu:0")
    assert np.isneginf(b[cand < 0]).all() and np.allclose(a[cand >= 0], b[cand >= 0], atol=1e-5)


def test_one_batch_size_default_and_no_literal_32_beside_it() -> None:
    """A batch size of its own (``batch_size=32``, ``or 32``) misses the embedding cache on an accelerator, whose
    default is 256: every default is :func:`default_batch_size`'s (issue 27)."""
    import re
    from pathlib import Path

    import embedscope

    root = Path(embedscope.__file__).parent
    literal = re.compile(r"(\bbatch_size\b[^\n(]*\b32\b|\bor 32\b)")
    found = [
        f"{path.relative_to(root)}:{n}"
        for package in ("models", "evaluation", "screen", "compare", "engines", "testing")
        for path in sorted((root / package).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if literal.search(line) and not line.lstrip().startswith(("#", ">>>"))
    ]
    assert found == []
