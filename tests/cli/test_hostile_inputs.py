"""Inputs and faults a user can cause end in one line naming the file (exit 2), never a traceback or a number."""

from __future__ import annotations

import errno
import json
import os
import shutil

import numpy as np
import pytest

from embedscope.cli.main import main


def _beir(folder, corpus_name="corpus.jsonl"):
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "cats purr", "d2": "the stock market fell", "d3": "rain is expected"}
    (folder / corpus_name).write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "stock market"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    return folder


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def _run(folder, tmp_path):
    return [
        "run",
        "-m",
        "static-64",
        "--tasks",
        str(folder),
        "--output-folder",
        str(tmp_path / "out"),
        "--no-cache",
        "--no-progress",
    ]


@pytest.mark.slow
def test_non_utf8_qrels_names_the_file(tmp_path, capsys):
    folder = _beir(tmp_path / "d")
    (folder / "qrels" / "test.tsv").write_bytes("query-id\tcorpus-id\tscore\nq1\td2\t1\n# caf\xe9\n".encode("latin-1"))
    assert "test.tsv: not valid UTF-8" in _error(capsys, _run(folder, tmp_path))


def test_non_utf8_config_names_the_file(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_bytes("models: [static-64]\n# caf\xe9\n".encode("latin-1"))
    assert "c.yaml: not valid UTF-8" in _error(capsys, ["run", "--config", str(config)])


@pytest.mark.slow
def test_corrupt_gzip_names_the_file(tmp_path, capsys):
    folder = _beir(tmp_path / "d")
    (folder / "corpus.jsonl").unlink()
    (folder / "corpus.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage-not-gzip")
    assert "corpus.jsonl.gz: corrupt or truncated gzip" in _error(capsys, _run(folder, tmp_path))


def test_corpus_file_that_is_a_folder(tmp_path, capsys):
    folder = _beir(tmp_path / "d")
    (folder / "corpus.jsonl").unlink()
    (folder / "corpus.jsonl").mkdir()
    assert "corpus.jsonl: is a folder, but the corpus must be a file" in _error(capsys, _run(folder, tmp_path))


def test_symlink_loop(tmp_path, capsys):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    assert "symbolic link loop" in _error(capsys, _run(tmp_path / "a", tmp_path))


@pytest.mark.slow
def test_csv_with_an_unbalanced_quote_is_a_parse_error_at_its_line(tmp_path, capsys):
    folder = _beir(tmp_path / "d")
    (folder / "corpus.jsonl").unlink()
    (folder / "corpus.csv").write_text('_id,text\nd1,fine\nd2,"the stock market\nd3,rain\n')
    assert "corpus.csv, line 3: CSV parse error" in _error(capsys, _run(folder, tmp_path))


@pytest.mark.parametrize("empty", ["run", "qrels"])
def test_empty_run_or_qrels_names_the_file(tmp_path, capsys, empty):
    files = {"run": "q1 Q0 d2 1 0.9 x\n", "qrels": "q1 0 d2 1\n"}
    for name, text in files.items():
        (tmp_path / f"{name}.trec").write_text("" if name == empty else text)
    err = _error(capsys, ["score", "--qrels", str(tmp_path / "qrels.trec"), "--run", str(tmp_path / "run.trec")])
    expected = (
        "qrels.trec has no judgments (the file is empty)" if empty == "qrels" else "run.trec: the run file is empty"
    )
    assert expected in err


@pytest.mark.parametrize("k", ["0", "-3"])
def test_score_with_a_cutoff_below_one(tmp_path, capsys, k):
    (tmp_path / "run.trec").write_text("q1 Q0 d2 1 0.9 x\n")
    (tmp_path / "qrels.trec").write_text("q1 0 d2 1\n")
    err = _error(
        capsys, ["score", "--qrels", str(tmp_path / "qrels.trec"), "--run", str(tmp_path / "run.trec"), "--k", k]
    )
    assert "cutoffs (k) must be positive integers" in err


def test_chunk_a_binary_notebook(tmp_path, capsys):
    (tmp_path / "nb.ipynb").write_bytes(bytes(range(128, 256)))
    assert "nb.ipynb: not valid UTF-8" in _error(
        capsys, ["chunk", str(tmp_path / "nb.ipynb"), "-o", str(tmp_path / "c.jsonl")]
    )


@pytest.mark.slow
def test_chunk_output_that_is_a_folder(tmp_path, capsys):
    (tmp_path / "a.md").write_text("# Title\n\nSome text.\n")
    err = _error(capsys, ["chunk", str(tmp_path / "a.md"), "-o", str(tmp_path)])
    assert "is a folder: give the corpus file to write" in err


def test_cache_dir_that_is_a_file(tmp_path, capsys):
    folder = _beir(tmp_path / "d")
    (tmp_path / "cachefile").write_text("x")
    argv = [a for a in _run(folder, tmp_path) if a != "--no-cache"] + ["--cache-dir", str(tmp_path / "cachefile")]
    assert "--cache-dir " + str(tmp_path / "cachefile") + " is a file" in _error(capsys, argv)


@pytest.mark.slow
def test_output_folder_under_a_file(tmp_path, capsys):
    folder = _beir(tmp_path / "d")
    (tmp_path / "file").write_text("x")
    argv = _run(folder, tmp_path)
    argv[argv.index("--output-folder") + 1] = str(tmp_path / "file" / "sub")
    assert "Not a directory" in _error(capsys, argv)


@pytest.mark.slow
def test_full_disk_while_writing_results(tmp_path, capsys, monkeypatch):
    import embedscope.results.store as store

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store, "atomic_write_bytes", full)
    assert "no space left on device" in _error(capsys, _run(_beir(tmp_path / "d"), tmp_path))


@pytest.mark.slow
def test_full_disk_in_the_cache(tmp_path, capsys, monkeypatch):
    import sqlite3

    from embedscope.models.cache import EmbeddingCache

    def full(self, fingerprint, keys, vectors):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(EmbeddingCache, "put", full)
    argv = [a for a in _run(_beir(tmp_path / "d"), tmp_path) if a != "--no-cache"] + [
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    assert "embedding cache: database or disk is full" in _error(capsys, argv)


def test_verbose_shows_the_traceback(tmp_path, capsys):
    (tmp_path / "run.trec").write_text("q1 Q0 d2 1 0.9 x\n")
    (tmp_path / "qrels.trec").write_text("q1 0 d2 1\n")
    assert (
        main(
            [
                "--verbose",
                "score",
                "--qrels",
                str(tmp_path / "qrels.trec"),
                "--run",
                str(tmp_path / "run.trec"),
                "--k",
                "0",
            ]
        )
        == 2
    )
    assert "Traceback" in capsys.readouterr().err


# -- non-finite vectors -----------------------------------------------------------------------------------------


class _NanEncoder:
    """KeywordEncoder whose vector for any text containing 'market' is NaN."""

    def __new__(cls):
        from embedscope.testing.fakes import KeywordEncoder

        class Nan(KeywordEncoder):
            def _encode(self, texts, role, batch_size, show_progress):
                out = super()._encode(texts, role, batch_size, show_progress)
                out[["market" in t for t in texts]] = np.nan
                return out

        return Nan(["cats", "stock", "rain"], name="fake/nan")


def test_nan_vectors_from_a_model_are_an_error(tmp_path):
    import embedscope
    from embedscope.errors import NonFiniteError

    with pytest.raises(NonFiniteError, match=r"fake/nan: the model .* \('stock market'\)"):
        embedscope.evaluate(
            _NanEncoder(), [str(_beir(tmp_path / "d"))], output_folder=tmp_path / "o", cache=False, show_progress=False
        )
    assert not list((tmp_path / "o").rglob("d.json"))


def test_nan_vectors_from_the_cache_are_an_error(tmp_path):
    import sqlite3

    import embedscope
    from embedscope.errors import NonFiniteError
    from embedscope.models.cache import EmbeddingCache
    from embedscope.testing.fakes import KeywordEncoder

    encoder = KeywordEncoder(["cats", "stock", "rain"])
    cache = EmbeddingCache(tmp_path / "cache")
    data = str(_beir(tmp_path / "d"))
    embedscope.evaluate(encoder, [data], output_folder=tmp_path / "o", cache=cache, show_progress=False)
    with sqlite3.connect(cache.path(encoder.fingerprint)) as conn:  # every stored vector becomes infinite
        conn.execute("UPDATE vectors SET vec = ?", (np.full(3, np.inf, np.float32).tobytes(),))
    conn.close()
    with pytest.raises(NonFiniteError, match=r"the embedding cache .* \('"):
        embedscope.evaluate(
            encoder,
            [data],
            output_folder=tmp_path / "o",
            cache=EmbeddingCache(tmp_path / "cache"),
            show_progress=False,
            overwrite="always",
        )


def test_nan_vectors_from_an_engine_are_an_error():
    from embedscope.errors import NonFiniteError
    from embedscope.models.planned import LocalPlanned

    with pytest.raises(NonFiniteError, match="the stock market"):
        LocalPlanned(_NanEncoder()).encode(["cats", "the stock market"], role="document")


# -- gold scores and labels --------------------------------------------------------------------------------------


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _evaluate(task, tmp_path):
    from embedscope.evaluation.runner import evaluate
    from embedscope.testing.fakes import HashEncoder

    return evaluate(HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)


@pytest.mark.parametrize("bad", ["NaN", "inf", "-Infinity"])
def test_non_finite_sts_gold_score_names_file_and_line(tmp_path, bad):
    from embedscope.errors import DataFormatError

    rows = [{"sentence1": f"a {i}", "sentence2": "b", "score": i} for i in range(4)]
    rows[2]["score"] = bad
    path = _jsonl(tmp_path / "sts.jsonl", rows)
    with pytest.raises(DataFormatError, match=r"sts.jsonl, line 3: score .* is not a finite number"):
        _evaluate(f"sts:{path}", tmp_path)


def test_constant_sts_gold_scores_are_explained(tmp_path, recwarn):
    from embedscope.errors import DataFormatError

    path = _jsonl(tmp_path / "sts.jsonl", [{"sentence1": f"a {i}", "sentence2": "b", "score": 3} for i in range(4)])
    with pytest.raises(DataFormatError, match="every gold score is 3; Spearman"):
        _evaluate(f"sts:{path}", tmp_path)
    assert not [w for w in recwarn if "constant" in str(w.message).lower()]


def test_constant_gold_in_the_sts_scoring():
    from embedscope.errors import DataFormatError
    from embedscope.metrics.sts import sts_scores

    e = np.eye(3, dtype=np.float32)
    with pytest.raises(DataFormatError, match="gold scores do not vary"):
        sts_scores(e, e[::-1], [2.0, 2.0, 2.0])


def test_non_finite_pair_label_names_file_and_line(tmp_path):
    from embedscope.errors import DataFormatError

    rows = [{"sentence1": f"a {i}", "sentence2": "b", "label": i % 2} for i in range(4)]
    rows[1]["label"] = "nan"
    path = _jsonl(tmp_path / "pairs.jsonl", rows)
    with pytest.raises(DataFormatError, match=r"pairs.jsonl, line 2: label"):
        _evaluate(f"pairclassification:{path}", tmp_path)


def test_single_class_training_split_is_explained(tmp_path):
    from embedscope.errors import DataFormatError

    (tmp_path / "clf").mkdir()
    _jsonl(tmp_path / "clf" / "train.jsonl", [{"text": f"cat {i}", "label": "cat"} for i in range(6)])
    _jsonl(
        tmp_path / "clf" / "test.jsonl", [{"text": f"{w} {i}", "label": w} for i, w in enumerate(["cat", "dog"] * 3)]
    )
    with pytest.raises(DataFormatError, match="training split 'train' .* has only the class 'cat'"):
        _evaluate(f"classification:{tmp_path / 'clf'}", tmp_path)


# -- eval ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_eval_model(monkeypatch):
    import embedscope.models.specs as specs
    from embedscope.testing.fakes import HashEncoder

    monkeypatch.setattr(specs, "load_encoder", lambda *a, **k: HashEncoder(name="fake/hash"))


def _eval(tmp_path, dataset, *extra):
    return ["eval", "-m", "fake", "--task", "sentence-similarity", "--dataset", str(dataset), *extra]


def test_eval_output_folder_gets_a_file_inside(tmp_path, capsys, fake_eval_model):
    data = tmp_path / "pairs.csv"
    data.write_text("sentence1,sentence2,score\na cat,a dog,1\nrain,sun,2.5\nx y,x z,4\n")
    out = tmp_path / "outdir"
    out.mkdir()
    assert main(_eval(tmp_path, data, "--output", f"{out}/")) == 0
    written = list(out.iterdir())
    assert len(written) == 1 and json.loads(written[0].read_text())["model_id"] == "fake/hash"
    assert written[0].name == "fake_hash_sentence-similarity.json"


@pytest.mark.parametrize("bad,match", [("nan", "row 2: score 'nan' is not a finite number"), ("", "every score is 2")])
def test_eval_bad_gold_scores(tmp_path, capsys, fake_eval_model, bad, match):
    data = tmp_path / "pairs.jsonl"
    scores = [2, "nan", 2] if bad == "nan" else [2, 2, 2]
    _jsonl(data, [{"sentence1": f"a {i}", "sentence2": "b", "score": s} for i, s in enumerate(scores)])
    assert match in _error(capsys, _eval(tmp_path, data))


def test_eval_parquet_binary_text_is_decoded(tmp_path, capsys, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import embedscope.models.specs as specs
    from embedscope.testing.fakes import HashEncoder

    seen = []

    class Spy(HashEncoder):
        def _encode(self, texts, role, batch_size, show_progress):
            seen.extend(texts)
            return super()._encode(texts, role, batch_size, show_progress)

    monkeypatch.setattr(specs, "load_encoder", lambda *a, **k: Spy())
    table = pa.table(
        {
            "sentence1": pa.array([b"caf\xc3\xa9", b"rain", b"sun"], pa.binary()),
            "sentence2": ["café au lait", "rain again", "moon"],
            "score": [4.0, 3.0, 0.5],
        }
    )
    pq.write_table(table, tmp_path / "pairs.parquet")
    assert main(_eval(tmp_path, tmp_path / "pairs.parquet")) == 0
    assert "café" in seen and not any(t.startswith("b'") for t in seen)


def test_retrieval_parquet_binary_text_is_decoded(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from embedscope.data.detect import load_retrieval

    folder = _beir(tmp_path / "d")
    (folder / "corpus.jsonl").unlink()
    pq.write_table(
        pa.table({"_id": ["d1", "d2", "d3"], "text": pa.array([b"caf\xc3\xa9", b"stock", b"rain"], pa.binary())}),
        folder / "corpus.parquet",
    )
    data = load_retrieval(folder)
    assert "café" in data.corpus.texts and not any(t.startswith("b'") for t in data.corpus.texts)


# -- corrupt model files -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,match",
    [("model.safetensors", "the tensors need"), ("tokenizer.json", "invalid JSON"), ("modules.json", "invalid JSON")],
)
def test_truncated_model_file_is_named(tmp_path, capsys, tiny_model, name, match):
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    data = (model / name).read_bytes()
    (model / name).write_bytes(data[: len(data) // 3])
    argv = _run(_beir(tmp_path / "d"), tmp_path)
    argv[argv.index("static-64")] = str(model)
    err = _error(capsys, argv)
    assert f"{name}: {match}" in err and "corrupt or truncated" in err


@pytest.mark.slow
def test_truncated_onnx_file_is_named(tmp_path, capsys, tiny_model):
    from embedscope.models.specs import alias_path

    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(
        (alias_path("minilm-int8") / "model.onnx").read_bytes()[:50_000]
        if alias_path("minilm-int8").is_dir()
        else alias_path("minilm-int8").read_bytes()[:50_000]
    )
    argv = _run(_beir(tmp_path / "d"), tmp_path) + ["--tokenizer", str(tiny_model / "tokenizer.json")]
    argv[argv.index("static-64")] = str(onnx)
    assert "model.onnx: cannot load this model" in _error(capsys, argv)


# -- stored results ------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "content",
    [
        '{"task_name": "d", "scores": {"test": [{"main_sc',
        "[1, 2, 3]",
        '{"task_name": "d", "scores": {"test": 0.5}}',
        '{"task_name": "d", "scores": []}',
    ],
)
def test_broken_stored_result_offers_overwrite_always_which_works(tmp_path, capsys, content):
    argv = _run(_beir(tmp_path / "d"), tmp_path)
    assert main(argv) == 0
    (stored,) = (tmp_path / "out").rglob("d.json")
    capsys.readouterr()
    stored.write_text(content)
    err = _error(capsys, argv)
    assert f"Stored result {stored} is unreadable" in err and "--overwrite always" in err
    assert main([*argv, "--overwrite", "always"]) == 0
    assert json.loads(stored.read_text())["scores"]["test"][0]["main_score"] == 1.0


def test_report_on_a_result_of_the_wrong_shape(tmp_path, capsys):
    (tmp_path / "m" / "r").mkdir(parents=True)
    (tmp_path / "m" / "r" / "X.json").write_text('{"task_name": "X", "scores": {"test": 5}}')
    assert "X.json: not a task result of the expected shape" in _error(capsys, ["report", str(tmp_path)])


@pytest.mark.slow
def test_read_only_output_folder(tmp_path, capsys, monkeypatch):
    import embedscope.files as files

    def denied(*args, dir=None, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))

    monkeypatch.setattr(files.tempfile, "mkstemp", denied)
    err = _error(capsys, _run(_beir(tmp_path / "d"), tmp_path))
    assert f"{tmp_path / 'out'}" in err and "Permission denied" in err
