"""Fast backends of a torch model (embedscope.models.exports): exported once, cached, exactly the source's settings.

Every test here builds its own tiny BERT (2 layers, 32 wide) as a sentence-transformers or transformers folder; the
reference vectors come from sentence-transformers / transformers on that folder (the torch path).
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.errors import ConfigError, DataFormatError, MissingDependencyError
from embedscope.models import exports
from embedscope.models.cache import EmbeddingCache, with_cache
from embedscope.models.specs import BACKENDS, load_encoder, normalize_backend
from support.tiny_models import build_tiny_sentence_transformer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx is not installed")

TEXTS = [
    "a cat sat on the mat",
    "dogs bark at night while the town sleeps and the river runs past the old mill",
    "x",
    "Embedding models map sentences to vectors; similar sentences land near each other.",
    "the quick brown fox jumps over the lazy dog " * 6,
]


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "st")


@pytest.fixture(scope="module")
def tiny_st_prompts(tmp_path_factory: pytest.TempPathFactory, tiny_st: Path) -> Path:
    """The tiny model with CLS pooling, a query prompt, no Normalize module and max_seq_length 12."""
    folder = tmp_path_factory.mktemp("tiny") / "st-prompts"
    shutil.copytree(tiny_st, folder)
    modules = [m for m in json.loads((folder / "modules.json").read_text()) if not m["type"].endswith("Normalize")]
    (folder / "modules.json").write_text(json.dumps(modules))
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    pooling["pooling_mode"] = "cls"
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    config["prompts"] = {"query": "query: ", "document": ""}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    bert = json.loads((folder / "sentence_bert_config.json").read_text())
    bert["max_seq_length"] = 12
    (folder / "sentence_bert_config.json").write_text(json.dumps(bert))
    return folder


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Calls of the ONNX exporter, by the folder it wrote."""
    calls: list[str] = []
    original = exports.export_onnx

    def export(source: exports.ExportSource, target: Path) -> None:
        calls.append(str(target))
        original(source, target)

    monkeypatch.setattr(exports, "export_onnx", export)
    return calls


def _torch(folder: Path, role: str = "document") -> np.ndarray:
    return load_encoder(str(folder), device="cpu").encode(TEXTS, role=role)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_backend_names() -> None:
    for name in ("onnx-int8", "openvino", "openvino-bf16", "openvino-int8"):
        assert name in BACKENDS and normalize_backend(name.upper()) == name
    assert normalize_backend("ov-int8") == "openvino-int8" and normalize_backend("onnx_int8") == "onnx-int8"


@pytest.mark.slow
def test_onnx_export_equals_the_torch_path(tiny_st: Path, tmp_path: Path) -> None:
    encoder = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert encoder.backend == "onnx" and encoder.export_folder.parent == tmp_path / "exports"
    for role in ("query", "document"):
        np.testing.assert_allclose(encoder.encode(TEXTS, role=role), _torch(tiny_st, role), atol=1e-5, rtol=0)
    torch_encoder = load_encoder(str(tiny_st), device="cpu")
    assert (encoder.name, encoder.revision) == (torch_encoder.name, torch_encoder.revision)  # results file together


@pytest.mark.slow
def test_export_carries_pooling_prompts_normalisation_and_length(tiny_st_prompts: Path, tmp_path: Path) -> None:
    torch_encoder = load_encoder(str(tiny_st_prompts), device="cpu")
    encoder = load_encoder(str(tiny_st_prompts), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert (encoder.pooling, encoder.normalize, encoder.max_seq_length) == ("cls", False, 12)
    assert encoder.prompts == torch_encoder.prompts == {"query": "query: "}
    for role in ("query", "document"):
        np.testing.assert_allclose(
            encoder.encode(TEXTS, role=role), torch_encoder.encode(TEXTS, role=role), atol=1e-5, rtol=0
        )
    manifest = json.loads((encoder.export_folder / exports.MANIFEST).read_text())
    assert manifest["pooling"] == "cls" and manifest["max_seq_length"] == 12 and manifest["normalize"] is False


@pytest.mark.slow
def test_a_transformers_folder_exports_too(tiny_st: Path, tmp_path: Path) -> None:
    """A plain transformers folder (config.json + weights, no modules.json): mean pooling as the transformers backend."""
    folder = tmp_path / "bert"
    shutil.copytree(tiny_st, folder, ignore=shutil.ignore_patterns("modules.json", "1_Pooling", "2_Normalize", "*st*"))
    (folder / "config_sentence_transformers.json").unlink(missing_ok=True)
    reference = load_encoder(str(folder), backend="transformers", device="cpu", pooling="cls")
    encoder = load_encoder(str(folder), backend="onnx", device="cpu", pooling="cls", exports_dir=tmp_path)
    np.testing.assert_allclose(
        encoder.encode(TEXTS, role="query"), reference.encode(TEXTS, role="query"), atol=1e-5, rtol=0
    )


@pytest.mark.slow
def test_onnx_int8_stays_close_to_fp32(tiny_st: Path, tmp_path: Path) -> None:
    encoder = load_encoder(str(tiny_st), backend="onnx-int8", device="cpu", exports_dir=tmp_path)
    cosines = _cos(encoder.encode(TEXTS, role="document"), _torch(tiny_st))
    assert cosines.min() > 0.98, cosines
    assert encoder.fast_path["quantization"] == "int8-dynamic"
    graph = (encoder.export_folder / "model.onnx").read_bytes()
    assert b"DynamicQuantizeLinear" in graph or b"MatMulInteger" in graph


@pytest.mark.slow
def test_a_second_load_reuses_the_export(tiny_st: Path, tmp_path: Path, counted: list[str]) -> None:
    first = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    stamp = (first.export_folder / "model.onnx").stat().st_mtime_ns
    second = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert len(counted) == 1 and second.export_folder == first.export_folder
    assert (second.export_folder / "model.onnx").stat().st_mtime_ns == stamp
    assert second.fingerprint == first.fingerprint
    assert [p.name for p in (tmp_path / "exports").iterdir()] == [first.export_folder.name]  # no temporary left


@pytest.mark.slow
def test_a_damaged_or_partial_export_is_never_used(tiny_st: Path, tmp_path: Path, counted: list[str]) -> None:
    good = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    expected = good.encode(TEXTS, role="document")
    folder = good.export_folder
    onnx_file = folder / "model.onnx"
    onnx_file.write_bytes(onnx_file.read_bytes()[:1000])  # a half-written file
    again = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert len(counted) == 2
    np.testing.assert_array_equal(again.encode(TEXTS, role="document"), expected)
    (folder / exports.MANIFEST).unlink()  # killed before its manifest was written
    load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert len(counted) == 3


@pytest.mark.slow
def test_a_failed_export_leaves_nothing(tiny_st: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: exports.ExportSource, target: Path) -> None:
        (target / "model.onnx").write_bytes(b"half")
        raise RuntimeError("killed")

    monkeypatch.setattr(exports, "export_onnx", broken)
    with pytest.raises(RuntimeError, match="killed"):
        load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert list((tmp_path / "exports").iterdir()) == []


@pytest.mark.slow
def test_fingerprints_differ_per_variant_and_the_cache_keeps_them_apart(tiny_st: Path, tmp_path: Path) -> None:
    """A fast-path vector is never served to an exact run (nor the other way round)."""
    cache = EmbeddingCache(tmp_path / "cache")
    exact = with_cache(load_encoder(str(tiny_st), device="cpu"), cache)
    fp32 = with_cache(load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path), cache)
    int8 = with_cache(load_encoder(str(tiny_st), backend="onnx-int8", device="cpu", exports_dir=tmp_path), cache)
    assert len({exact.fingerprint, fp32.fingerprint, int8.fingerprint}) == 3
    reference = exact.encode(TEXTS, role="document")
    quantized = int8.encode(TEXTS, role="document")
    assert int8.stats.encoded == len(TEXTS) and int8.stats.hits == 0
    assert not np.array_equal(quantized, reference)
    np.testing.assert_array_equal(exact.encode(TEXTS, role="document"), reference)  # served: its own vectors
    assert exact.stats.hits == len(TEXTS)
    assert fp32.encode(TEXTS, role="document").shape == reference.shape and fp32.stats.hits == 0


@pytest.mark.slow
def test_the_export_key_follows_source_length_and_calibration(tiny_st: Path) -> None:
    source = exports.export_source(tiny_st, "onnx")
    key = exports.export_key(source.fingerprint, "onnx", 64, None)
    assert key == exports.export_key(source.fingerprint, "onnx", 64, None)
    others = {
        exports.export_key("0" * 64, "onnx", 64, None),
        exports.export_key(source.fingerprint, "onnx-int8", 64, None),
        exports.export_key(source.fingerprint, "onnx", 32, None),
        exports.export_key(source.fingerprint, "onnx", 64, exports.calibration_hash(["a"])),
    }
    assert key not in others and len(others) == 4
    calibrated = exports.export_key(source.fingerprint, "openvino-int8", 64, exports.calibration_hash(["a"]))
    settings = [{"smooth_quant_alpha": None}, {"smooth_quant_alpha": 0.5}]
    keyed = {
        exports.export_key(source.fingerprint, "openvino-int8", 64, exports.calibration_hash(["a"]), s)
        for s in settings
    }
    assert len(keyed) == 2 and calibrated not in keyed  # the quantizer's settings change the graph: the key follows


def test_calibration_files_and_samples(tmp_path: Path) -> None:
    lines = tmp_path / "calib.txt"
    lines.write_text("first text\n\nsecond text\n", encoding="utf-8")
    assert exports.read_calibration_file(lines) == ["first text", "second text"]
    rows = tmp_path / "calib.jsonl"
    rows.write_text('{"text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    assert exports.read_calibration_file(rows) == ["a", "b"]
    rows.write_text('{"title": "a"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="calib.jsonl, line 1"):
        exports.read_calibration_file(rows)
    with pytest.raises(DataFormatError, match="missing.txt: cannot read"):
        exports.read_calibration_file(tmp_path / "missing.txt")
    texts = [f"text {i}" for i in range(1000)]
    sample = exports.calibration_sample(texts)
    assert len(sample) == exports.CALIBRATION_SIZE == len(set(sample)) and set(sample) <= set(texts)
    assert sample == exports.calibration_sample(list(reversed(texts)))  # the order given does not matter


def test_task_calibration_samples_the_tasks_texts() -> None:
    from embedscope.evaluation.models import TaskCalibration
    from embedscope.testing.tiny import TINY_CORPUS, TINY_QUERIES, tiny_retrieval_task

    calibration = TaskCalibration(lambda: [tiny_retrieval_task()])
    sample = calibration()
    assert sorted(sample) == sorted({*TINY_CORPUS.values(), *TINY_QUERIES.values()})  # fewer than 300: all of them
    assert str(calibration) == f"task-texts:{exports.calibration_hash(sample)}"


# -- errors: one line, exit 2 -----------------------------------------------------------------------------------


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


@pytest.mark.slow
def test_cli_errors(tiny_st: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = ["run", "--tasks", "LeeDocumentSimilarity", "--output-folder", str(tmp_path / "out"), "--no-progress"]
    assert "Did you mean 'onnx-int8'" in _error(capsys, [*run, "--model", str(tiny_st), "--backend", "onnx-int9"])
    calibration = tmp_path / "nope.txt"
    err = _error(
        capsys, [*run, "--model", str(tiny_st), "--backend", "openvino-int8", "--calibration", str(calibration)]
    )
    assert "nope.txt" in err
    err = _error(capsys, [*run, "--model", str(tiny_st), "--backend", "onnx-int8", "--calibration", str(calibration)])
    assert "calibration applies to --backend openvino-int8 only" in err
    dense = tmp_path / "dense"
    shutil.copytree(tiny_st, dense)
    modules = json.loads((dense / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (dense / "modules.json").write_text(json.dumps(modules))
    assert "Dense" in _error(capsys, [*run, "--model", str(dense), "--backend", "onnx", "--cache-dir", str(tmp_path)])


def test_models_that_cannot_be_exported(tmp_path: Path) -> None:
    onnx_file = tmp_path / "model.onnx"
    onnx_file.write_bytes(b"not really")
    with pytest.raises(ConfigError, match=r"model\.onnx: cannot load this model \(InvalidProtobuf"):
        load_encoder(str(onnx_file), backend="onnx-int8", exports_dir=tmp_path)  # a graph's fast path reads it
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])
    )
    (no_weights / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ConfigError, match="no transformers config.json with torch weights"):
        load_encoder(str(no_weights), backend="onnx", exports_dir=tmp_path)


@pytest.mark.slow
def test_a_missing_extra_names_it(tiny_st: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def without(name: str, *args: object, **kwargs: object) -> object:
        if name in ("onnx", "openvino") or name.startswith(("onnx.", "openvino.")):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", without)
    with pytest.raises(MissingDependencyError, match=r"pip install 'embedscope\[onnx-export\]'"):
        load_encoder(str(tiny_st), backend="onnx-int8", exports_dir=tmp_path)
    with pytest.raises(MissingDependencyError, match=r"pip install 'embedscope\[openvino\]'"):
        load_encoder(str(tiny_st), backend="openvino", exports_dir=tmp_path)


@pytest.mark.slow  # imports a heavy library (mteb, onnx, sentence-transformers): seconds
def test_a_missing_extra_is_one_line_from_the_cli(
    tiny_st: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(backend: str) -> None:
        raise exports.missing_extra("onnx-export", backend)

    monkeypatch.setattr(exports, "_import_onnx_tools", missing)
    argv = ["run", "--model", str(tiny_st), "--backend", "onnx-int8", "--tasks", "LeeDocumentSimilarity"]
    err = _error(capsys, [*argv, "--output-folder", str(tmp_path / "out"), "--cache-dir", str(tmp_path)])
    assert "pip install 'embedscope[onnx-export]'" in err


# -- a whole run ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_records_the_fast_path(tiny_st: Path, tmp_path: Path) -> None:
    import embedscope
    from embedscope.testing.tiny import tiny_retrieval_task

    kwargs = {"output_folder": tmp_path / "out", "cache_dir": tmp_path / "cache", "show_progress": False}
    exact = embedscope.evaluate(str(tiny_st), [tiny_retrieval_task()], **kwargs).outcomes[0]
    fast = embedscope.evaluate(str(tiny_st), [tiny_retrieval_task()], model_options={"backend": "onnx"}, **kwargs)
    outcome = fast.outcomes[0]
    assert outcome.path.parent != exact.path.parent  # the fast path's results have their own experiments folder
    meta = json.loads((outcome.path.parent / "model_meta.json").read_text())
    assert meta["backend"] == "onnx" and len(meta["export_key"]) == 64
    assert meta["run_settings"]["model"]["fingerprint"] != exact.result.extra["run_settings"]["model"]["fingerprint"]
    result = json.loads(outcome.path.read_text())
    assert result["backend"] == "onnx" and result["export_key"] == meta["export_key"]
    assert "backend" not in json.loads(exact.path.read_text())  # an exact run's records are as before
    assert (tmp_path / "cache" / "exports" / meta["export_key"] / exports.MANIFEST).is_file()
    assert abs(outcome.result.main_score() - exact.result.main_score()) < 1e-5


# -- OpenVINO (the other module's interface) ------------------------------------------------------------------


@pytest.mark.slow  # about 40 s: three IR conversions and an NNCF calibration
def test_openvino_variants(tiny_st: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    openvino_backend = pytest.importorskip("embedscope.models.openvino_backend")
    # bf16's export and label only are compared here (its vectors: test_openvino_backend.py, where the CPU has bf16)
    monkeypatch.setattr(openvino_backend, "cpu_capabilities", lambda: ("FP32", "INT8", "BF16"))
    reference = _torch(tiny_st)
    fp32 = load_encoder(str(tiny_st), backend="openvino", device="cpu", exports_dir=tmp_path)
    np.testing.assert_allclose(fp32.encode(TEXTS, role="document"), reference, atol=1e-4, rtol=0)
    bf16 = load_encoder(str(tiny_st), backend="openvino-bf16", device="cpu", exports_dir=tmp_path)
    assert bf16.export_folder == fp32.export_folder and bf16.fingerprint != fp32.fingerprint
    calibration = tmp_path / "calib.txt"
    calibration.write_text("\n".join(TEXTS * 4), encoding="utf-8")
    int8 = load_encoder(
        str(tiny_st), backend="openvino-int8", device="cpu", exports_dir=tmp_path, calibration=str(calibration)
    )
    assert _cos(int8.encode(TEXTS, role="document"), reference).min() > 0.95
    assert int8.fast_path["calibration"]["texts"] == len(set(TEXTS))
    from embedscope.models.openvino_backend import INT8_DEFAULT

    manifest = json.loads((int8.export_folder / exports.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["quantization_settings"] == INT8_DEFAULT.key()


# -- the shipped MiniLM (slow) ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def builtin_scores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    """Main scores of MiniLM on the built-in suite per fp32 backend (torch, onnx, and openvino when present), every
    task's full protocol with texts cut to 32 tokens on every path (so a suite takes about a minute instead of ten;
    bench/bench_openvino_suite.py compares the full-length suite)."""
    import embedscope
    from embedscope.tasks.registry import DEFAULT_TASKS

    folder = tmp_path_factory.mktemp("builtin")
    backends = [None, "onnx"]
    try:
        import embedscope.models.openvino_backend  # noqa: F401

        backends.append("openvino")
    except ImportError:
        pass
    scores = {}
    for backend in backends:
        report = embedscope.evaluate(
            "minilm",
            list(DEFAULT_TASKS),
            model_options={"max_seq_length": 32, **({"backend": backend} if backend else {})},
            output_folder=folder / "out",
            cache_dir=folder / "cache",
            show_progress=False,
        )
        scores[backend or "torch"] = {o.task.name: o.result.main_score() for o in report.outcomes}
    return scores


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.xdist_group("builtin_scores")  # one worker computes the module's fixture once for both backends
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_minilm_fp32_fast_paths_keep_every_builtin_score(
    builtin_scores: dict[str, dict[str, float]], backend: str
) -> None:
    if backend not in builtin_scores:
        pytest.skip(f"{backend}: its module is not in this build")
    torch_scores, fast = builtin_scores["torch"], builtin_scores[backend]
    assert set(fast) == set(torch_scores) and len(fast) == 4
    for task, score in torch_scores.items():
        assert abs(fast[task] - score) < 1e-4, (task, score, fast[task])


@pytest.mark.long
@pytest.mark.slow
def test_minilm_onnx_int8_score_shift(tmp_path: Path) -> None:
    """The int8 path moves LeeDocumentSimilarity's score a little, by how much depends on the CPU's int8 kernels
    (measured on the whole suite at full length: Retrieval −0.0040, Clustering −0.0116, Classification −0.0017,
    Lee +0.0013; Lee +0.0104 on the 2-core CI machine, 2026-11-27). A broken quantization moves it by tenths."""
    import embedscope

    scores = {}
    for backend in (None, "onnx-int8"):
        report = embedscope.evaluate(
            "minilm",
            ["LeeDocumentSimilarity"],
            model_options={"backend": backend} if backend else {},
            output_folder=tmp_path / "out",
            cache_dir=tmp_path / "cache",
            show_progress=False,
        )
        scores[backend] = report.outcomes[0].result.main_score()
    assert scores[None] != scores["onnx-int8"] and abs(scores["onnx-int8"] - scores[None]) < 0.02, scores
