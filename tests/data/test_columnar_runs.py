"""The columnar TREC run reader: the same run, order and errors as a line-by-line reading, block by block."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from embedscope.data import runs
from embedscope.data.runs import read_ranked_run, read_run, read_trec_run
from embedscope.errors import DataFormatError


def _reference(text: str) -> dict[str, dict[str, float]]:
    """The run as a plain line-by-line reading gives it (queries and docs in order of appearance)."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            out.setdefault(parts[0], {})[parts[2]] = float(parts[4])
    return out


def _random_lines(seed: int = 0, queries: int = 40) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(queries):
        n = int(rng.integers(1, 30))  # rows of different lengths
        docs = rng.choice(500, size=n, replace=False)
        scores = np.round(rng.normal(size=n), 2)  # ties
        lines += [f"q{q} Q0 d{d} {r} {s!r} tag" for r, (d, s) in enumerate(zip(docs, scores.tolist()), 1)]
    return lines


@pytest.fixture()
def small_blocks(monkeypatch):
    monkeypatch.setattr(runs, "_BLOCK_BYTES", 256)  # many blocks, lines cut at block ends


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "tabs", "spaces", "crlf", "blank-lines", "bom", "shuffled", "gz"])
def test_same_run_as_line_by_line_reading(tmp_path, small_blocks, variant):
    lines = _random_lines()
    if variant == "shuffled":  # queries interleaved: rows keep file order within each query
        lines = [lines[i] for i in np.random.default_rng(1).permutation(len(lines))]
    text = "\n".join(lines) + "\n"
    if variant == "tabs":
        text = text.replace(" ", "\t")
    elif variant == "spaces":  # valid TREC that pyarrow's single-delimiter reading rejects in some blocks
        text = "\n".join(ln.replace(" ", "  ") if i % 7 == 3 else ln for i, ln in enumerate(lines)) + "\n   \n"
    elif variant == "crlf":
        text = text.replace("\n", "\r\n")
    elif variant == "blank-lines":
        text = "\n\n" + text.replace("\n", "\n\n")
    path = tmp_path / ("run.trec.gz" if variant == "gz" else "run.trec")
    raw = ("\ufeff" if variant == "bom" else "").encode() + text.encode()
    path.write_bytes(gzip.compress(raw) if variant == "gz" else raw)
    expected = _reference(text)
    got = read_run(path)
    assert got == expected and list(got) == list(expected)
    assert all(list(got[q]) == list(expected[q]) for q in expected)
    ranked = read_ranked_run(path)
    assert ranked.query_ids == tuple(expected) and ranked.depth == max(map(len, expected.values()))
    assert ranked.doc_index.dtype == np.int64 and ranked.scores.dtype == np.float64


def test_rectangular_run_and_exact_scores(tmp_path):
    values = [0.1 + 0.2, 1e-300, -0.0, 1.7976931348623157e308, 2.5e-7, 123456789.123456789]  # largest finite
    text = "".join(f"q{q} Q0 d{i} {i} {v!r} t\n" for q in range(3) for i, v in enumerate(values))
    (tmp_path / "run").write_text(text)
    run = read_trec_run(tmp_path / "run")
    assert run.scores.shape == (3, 6) and run.scores[0].tolist() == [float(v) for v in values]
    assert run.doc_ids == tuple(f"d{i}" for i in range(6)) and (run.doc_index >= 0).all()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q9 Q0 d1 1 abc tag", r"line 58: score 'abc' is not a number"),
        ("q9 Q0 d1 1 nan tag", r"line 58: score is NaN"),
        ("q9 Q0 d1 1 1e400 tag", r"line 58: score '1e400' is infinite"),
        ("q9 d1 0.5", r"line 58: expected 6 fields 'qid Q0 docid rank score tag', got 3"),
        ("q9 Q0 d1 1 NA tag", r"line 58: score 'NA' is not a number"),
    ],
)
def test_errors_name_the_line_and_rescan_only_that_block(tmp_path, small_blocks, monkeypatch, line, message):
    lines = _random_lines(queries=5)
    assert len(lines) > 60
    lines[57] = line
    (tmp_path / "run.trec").write_text("\n".join(lines) + "\n")
    scanned = []
    python_block = runs._python_block
    monkeypatch.setattr(
        runs, "_python_block", lambda path, block, first: scanned.append(first) or python_block(path, block, first)
    )
    with pytest.raises(DataFormatError, match=r"run.trec, " + message):
        read_run(tmp_path / "run.trec")
    assert len(scanned) == 1 and scanned[0] <= 58  # only the failing block was read line by line


def test_invalid_utf8_names_the_line(tmp_path):
    (tmp_path / "run").write_bytes(b"q1 Q0 d1 1 0.5 t\nq1 Q0 d\xff2 2 0.4 t\n")
    with pytest.raises(DataFormatError, match=r"run, line 2: not valid UTF-8"):
        read_run(tmp_path / "run")


@pytest.mark.parametrize("shuffled", [False, True])
def test_duplicates_name_both_lines_across_blocks(tmp_path, small_blocks, shuffled):
    lines = _random_lines(queries=6)
    if shuffled:
        lines = [lines[i] for i in np.random.default_rng(3).permutation(len(lines))]
    victim = lines[10].split()
    later = next(i for i in range(40, len(lines)) if lines[i].split()[0] != victim[0])
    lines.insert(later, f"{victim[0]} Q0 {victim[2]} 99 0.5 t")  # far from the first: another block
    (tmp_path / "run").write_text("\n\n".join(lines) + "\n")  # blank lines: line numbers are not row numbers
    first = 2 * lines.index(lines[10]) + 1
    with pytest.raises(
        DataFormatError,
        match=rf"run, line {2 * later + 1}: document '{victim[2]}' appears twice for "
        rf"query '{victim[0]}' \(first at line {first}\)",
    ):
        read_ranked_run(tmp_path / "run")


def test_json_run_and_empty_file(tmp_path):
    (tmp_path / "run.json").write_text('{"q1": {"d1": 2, "d2": 0.5}, "q2": {}}')
    ranked = read_ranked_run(tmp_path / "run.json")
    assert ranked.query_ids == ("q1", "q2") and ranked.to_dict() == {"q1": {"d1": 2.0, "d2": 0.5}, "q2": {}}
    (tmp_path / "empty").write_text("\n")
    assert read_run(tmp_path / "empty") == {} and read_ranked_run(tmp_path / "empty").query_ids == ()


def test_a_line_longer_than_a_block(tmp_path, small_blocks):
    long_id = "d" + "x" * 1000
    (tmp_path / "run").write_text(f"q1 Q0 a 1 0.5 t\nq1 Q0 {long_id} 2 0.25 t\nq2 Q0 a 1 1 t\n")
    assert read_run(tmp_path / "run") == {"q1": {"a": 0.5, long_id: 0.25}, "q2": {"a": 1.0}}


@pytest.mark.parametrize("header", ["", "query-id\tcorpus-id\tscore\n"])
def test_qrels_fast_path_reads_what_the_line_reading_reads(tmp_path, monkeypatch, header):
    rng = np.random.default_rng(5)
    rows = [(f"q{rng.integers(50)}", f"d{rng.integers(300)}", int(rng.integers(-1, 4))) for _ in range(400)]
    unique = list({(q, d): r for q, d, r in rows}.items())
    sep = "\t" if header else " "
    text = header + "".join(f"{q}{sep}{'' if header else '0' + sep}{d}{sep}{r}\n" for (q, d), r in unique)
    (tmp_path / "qrels").write_text(text)
    fast = runs.read_qrels(tmp_path / "qrels")
    monkeypatch.setattr(runs, "_columnar_qrels", lambda *args: None)
    slow = runs.read_qrels(tmp_path / "qrels")
    assert fast == slow and list(fast) == list(slow) and sum(map(len, fast.values())) == len(unique)


def test_qrels_fast_path_leaves_odd_lines_to_the_line_reading(tmp_path):
    (tmp_path / "qrels").write_text("q1 0 d1 1\nq1 0 d1 1\nq1  0 d2 2.0\n")  # a repeat, two spaces, 2.0
    assert runs.read_qrels(tmp_path / "qrels") == {"q1": {"d1": 1, "d2": 2}}
    (tmp_path / "qrels").write_text("q1 0 d1 1\nq2 0 d1 0\nq1 0 d1 2\n")
    with pytest.raises(DataFormatError, match=r"line 3: query 'q1' / document 'd1' is judged 2, but .*line 1"):
        runs.read_qrels(tmp_path / "qrels")


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    "text", [b"", b"\xef\xbb\xbf", b"a\nbb\n", b"\xef\xbb\xbfa b\nc", b"x" * 1000 + b"\ny\n" * 300]
)
def test_blocks_are_whole_lines_at_their_offsets(tmp_path, small_blocks, text, gz):
    path = tmp_path / ("run.trec.gz" if gz else "run.trec")  # mapped, or read through two buffers
    path.write_bytes(gzip.compress(text) if gz else text)
    blocks = [(offset, bytes(block)) for offset, block in runs._blocks(path)]
    assert b"".join(block for _, block in blocks) == text.removeprefix(b"\xef\xbb\xbf")
    ends = [offset + len(block) for offset, block in blocks]
    assert [offset for offset, _ in blocks] == ([3] if text.startswith(b"\xef") else [0])[: len(blocks)] + ends[:-1]
    assert all(block.endswith(b"\n") for _, block in blocks[:-1])
