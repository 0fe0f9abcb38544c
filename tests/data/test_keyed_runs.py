"""Scoring a TREC run file by doc-id keys (no vocabulary) gives exactly what scoring its RankedRun gives."""

from __future__ import annotations

import gzip

import numpy as np
import pyarrow as pa
import pytest

from embedscope.data import runs
from embedscope.data.runs import id_keys, read_keyed_run, read_trec_run
from embedscope.errors import DataFormatError
from embedscope.evaluation.runner import rank_run
from embedscope.metrics import evaluate_ranking
from embedscope.metrics.ranking import KeyClash
from embedscope.types import KeyedRun, short_id, short_order

NAMES = {
    "short": lambda i: f"d{i}",
    "long": lambda i: f"document-{i:06d}",
    "mixed": lambda i: f"d{i}" if i % 3 else f"doc{i}-" + "x" * (i % 11),
    "unicode": lambda i: f"é{i}" if i % 2 else f"ドキュメント{i}",
    "edge": lambda i: f"{i:0{6 + i % 3}d}",  # 6, 7 and 8 bytes: both sides of the short/long limit
}


def _files(tmp_path, names, variant, seed=0):
    rng = np.random.default_rng(seed)
    lines, qrels = [], []
    for q in range(60):
        n = int(rng.integers(0 if variant == "ragged" else 40, 40 + 1))
        docs = rng.choice(400, size=n, replace=False)
        scores = np.round(rng.normal(size=n), 1)  # many ties
        if q % 5 == 0:
            scores[:] = 0.5  # a row of one tie
        lines += [f"q{q} Q0 {names(int(d))} {r} {s!r} t" for r, (d, s) in enumerate(zip(docs, scores.tolist()), 1)]
        judged = list(rng.choice(docs, size=min(n, 4), replace=False)) + list(rng.integers(400, 420, size=2))
        qrels += [f"q{q} 0 {names(int(d))} {int(rng.integers(0, 4))}" for d in dict.fromkeys(judged)]
    if variant == "shuffled":
        lines = [lines[i] for i in rng.permutation(len(lines))]
    text = (
        "\n".join(ln.replace(" ", "  ") if variant == "spaces" and i % 7 == 3 else ln for i, ln in enumerate(lines))
        + "\n"
    )
    run_path = tmp_path / ("run.trec.gz" if variant == "gz" else "run.trec")
    run_path.write_bytes(gzip.compress(text.encode()) if variant == "gz" else text.encode())
    qrels_path = tmp_path / "qrels.trec"
    qrels_path.write_text("\n".join(qrels) + "\n")
    return qrels_path, run_path


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "shuffled", "ragged", "spaces", "gz"])
@pytest.mark.parametrize("kind", sorted(NAMES))
def test_keyed_scores_equal_ranked_scores(tmp_path, monkeypatch, kind, variant):
    monkeypatch.setattr(runs, "_BLOCK_BYTES", 4096)
    qrels_path, run_path = _files(tmp_path, NAMES[kind], variant)
    keyed = read_keyed_run(run_path)
    assert isinstance(keyed, KeyedRun)
    from embedscope.data.runs import read_qrels

    qrels = read_qrels(qrels_path)
    got = evaluate_ranking(qrels, keyed)
    want = evaluate_ranking(qrels, read_trec_run(run_path))
    assert got.query_ids == want.query_ids
    for name, values in want.per_query.items():
        assert got.per_query[name].tolist() == values.tolist(), name
    assert got.to_mteb() == want.to_mteb()


def test_shared_keys_fall_back_to_the_vocabulary(tmp_path, monkeypatch):
    qrels_path, run_path = _files(tmp_path, NAMES["long"], "plain")
    want = evaluate_ranking(runs.read_qrels(qrels_path), read_trec_run(run_path)).to_mteb()
    real = runs.id_keys

    def shared(column, out=None):
        keys = real(column, out=out)
        keys[:] = (keys | np.int64(1 << 59)) & ~np.int64((1 << 59) - 1)
        return keys

    monkeypatch.setattr(runs, "id_keys", shared)
    assert read_keyed_run(run_path) is None  # every key shared
    assert rank_run(qrels_path, run_path).to_mteb() == want


def test_a_retrieved_id_sharing_a_relevant_ids_key_is_caught():
    [k_relevant, k_other] = id_keys(pa.array(["relevant-doc", "other-doc"])).tolist()
    run = KeyedRun(
        ("q1",),
        np.array([[k_relevant, k_other]]),
        np.array([[0.9, 0.5]]),
        np.array([0, 1]),
        pa.array(["impostor-doc", "other-doc"]),
    )  # slot 0's id is not relevant-doc, yet has its key
    with pytest.raises(KeyClash):
        evaluate_ranking({"q1": {"relevant-doc": 1}}, run)


def test_duplicates_still_name_both_lines(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8 t\nq1 Q0 d1 3 0.7 t\n")
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("q1 0 d1 1\n")
    assert read_keyed_run(path) is None
    with pytest.raises(
        DataFormatError, match=r"line 3: document 'd1' appears twice for query 'q1' \(first at line 1\)"
    ):
        rank_run(qrels, path)


def test_short_keys_are_the_ids_in_string_order():
    ids = ["", "a", "a\x00", "ab", "b", "d10", "d9", "é", "ドキ", "zzzzzzz", "0000000"]
    keys = id_keys(pa.array(ids))
    assert [short_id(k) for k in keys.tolist()] == ids
    words, lengths = short_order(keys)
    order = sorted(range(len(ids)), key=lambda i: (int(words[i]), int(lengths[i])))
    assert [ids[i] for i in order] == sorted(ids)
    long = id_keys(pa.array(["abcdefgh", "abcdefgh", "abcdefgi", "0000000"]))
    assert long[0] == long[1] != long[2] and long[:3].min() >= 1 << 59 and long[3] < 1 << 59


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 70_000])
def test_keys_at_the_end_of_the_data_and_of_slices(n):
    rng = np.random.default_rng(n)
    ids = [("x" * int(rng.integers(1, 20)))[:-1] + str(i % 10) for i in range(n)]
    column = pa.array(["pad", *ids])[1:]  # an offset into the buffers
    keys = id_keys(column).tolist()
    one_by_one = [id_keys(pa.array([i]))[0] for i in ids[:50] + ids[-50:]]
    assert keys[:50] + keys[-50:] == one_by_one
    assert len(set(keys)) == len(set(ids))


@pytest.mark.parametrize("shared", [False, True])
def test_query_runs_compare_ids_exactly(monkeypatch, shared):
    rng = np.random.default_rng(3)
    pool = ["q1", "q2", "query-long-0001", "query-long-0002", "query-long-00010", "é-long-query-id", "x" * 30, "x" * 31]
    ids = [pool[i] for i in np.repeat(rng.integers(0, len(pool), 300), rng.integers(1, 4, 300))]
    if shared:  # every long id hashed alike: the bytes decide
        real = runs.id_keys

        def same_hash(column, out=None):
            keys = real(column, out=out)
            keys[keys >> 59 > 0] = 1 << 59
            return keys

        monkeypatch.setattr(runs, "id_keys", same_hash)
    starts = runs._run_starts(pa.array(["pad", *ids])[1:]).tolist()
    assert starts == [0] + [i for i in range(1, len(ids)) if ids[i] != ids[i - 1]]
    codes, lengths = runs._QueryCodes().runs(pa.array(ids))
    first = {q: i for i, q in enumerate(dict.fromkeys(ids))}
    assert np.repeat(codes, lengths).tolist() == [first[q] for q in ids]


def test_interleaved_query_ids_are_coded_in_order_of_appearance():
    ids = [f"q{i}" for i in np.random.default_rng(4).integers(0, 300, 20_000)]
    codes, lengths = runs._QueryCodes().runs(pa.array(ids))
    assert len(codes) > 4096
    first = {q: i for i, q in enumerate(dict.fromkeys(ids))}
    assert np.repeat(codes, lengths).tolist() == [first[q] for q in ids]
