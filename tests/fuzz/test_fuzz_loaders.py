"""Property-based fuzzing of every loader: malformed input gives an embedscope error, never a crash.

Each property writes a generated (mostly almost-valid, partly garbage) input into a fresh folder,
calls the loader, and asserts that it either loads or raises an
:class:`~embedscope.errors.EmbedscopeError` subclass, and that no file appears outside that folder
(the folder itself and the working directory are compared before and after).

Deterministic (``derandomize=True``, no example database). 10,000 examples in all by default;
``EMBEDSCOPE_FUZZ_EXAMPLES=<n>`` sets the total (spread over the properties in the same proportions).
Each property runs twice: ``[full]`` (marked slow) with that total, ``[sample]`` in the fast tier with
``SAMPLE_TOTAL`` examples in all, the same deterministic generator cut short.
Inputs are valid UTF-8: undecodable bytes and corrupt compression have their own tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from embedscope.errors import EmbedscopeError
from embedscope.settings.run import ChunkingSettings

DEFAULT_TOTAL = 10_000
_SHARES = {
    "beir": 1300,
    "evalscope": 1100,
    "tables": 1300,
    "parquet": 500,
    "qrels": 1400,
    "runs": 1300,
    "config": 1300,
    "fastbook": 1000,
    "notebooks": 800,
}
assert sum(_SHARES.values()) == DEFAULT_TOTAL


def examples(kind: str, total: int | None = None) -> int:
    """A property's share of ``total`` examples (default: ``EMBEDSCOPE_FUZZ_EXAMPLES``, else 10,000)."""
    if total is None:
        total = int(os.environ.get("EMBEDSCOPE_FUZZ_EXAMPLES", DEFAULT_TOTAL))
    return max(1, round(_SHARES[kind] * total / DEFAULT_TOTAL))


def fuzz(kind: str):
    def decorate(test):
        test.fuzz_kind = kind
        return settings(
            max_examples=examples(kind),
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        )(test)

    return decorate


SAMPLE_TOTAL = 300  # the fast tier's examples, over all properties


@pytest.fixture(
    autouse=True, params=[pytest.param("sample", id="sample"), pytest.param("full", id="full", marks=pytest.mark.slow)]
)
def tier(request):
    """``full``: the property with all of its examples; ``sample``: with its share of ``SAMPLE_TOTAL``."""
    test = request.function
    full = test._hypothesis_internal_use_settings  # where @given reads a test's settings, on every call
    if request.param == "full":
        yield
        return
    sample = min(full.max_examples, examples(test.fuzz_kind, SAMPLE_TOTAL))
    test._hypothesis_internal_use_settings = settings(full, max_examples=sample)
    try:
        yield
    finally:
        test._hypothesis_internal_use_settings = full


# -- building blocks ------------------------------------------------------------------------------

KEYS = [
    "_id",
    "id",
    "text",
    "title",
    "query-id",
    "corpus-id",
    "score",
    "query_id",
    "corpus_id",
    "doc_id",
    "qid",
    "docid",
    "pid",
    "label",
    "relevance",
    "query",
    "positive",
    "negative",
    "body",
    "",
]
# Mostly picks from pools of awkward values (one cheap draw each), sometimes freely generated ones.
WEIRD = [
    "",
    " ",
    "\t",
    "q1",
    "q2",
    "d1",
    "d2",
    "d3",
    "0",
    "1",
    "-1",
    "1.5",
    "NaN",
    "inf",
    "1e309",
    "é",
    "日本",
    "a b",
    "a\tb",
    "a\nb",
    "a,b",
    '"',
    "'",
    "\\",
    "\u0000",
    "\u2028",
    "\ufeff",
    "Q0",
    "#",
    "{",
    "[",
    "null",
]
JSON_POOL: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    2**63,
    -(2**70),
    0.5,
    1.0,
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    *WEIRD,
    [],
    {},
    [None],
    ["d1"],
    [1, 2],
    [[]],
    {"_id": None},
    {"text": ["a"]},
    {"q1": {"d1": 1}},
    {"q1": ["d1"]},
    {"": ""},
    {"score": "x"},
]
text = st.one_of(
    st.sampled_from(WEIRD),
    st.sampled_from(WEIRD),
    st.sampled_from(WEIRD),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
)
ids = st.one_of(st.sampled_from(["q1", "q2", "d1", "d2", "d3", "0", "1"]), st.sampled_from(["q1", "d1", "d2"]), text)
scalars = st.one_of(
    st.sampled_from(JSON_POOL),
    st.sampled_from(JSON_POOL),
    st.sampled_from(JSON_POOL),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
json_values = st.one_of(
    st.sampled_from(JSON_POOL),
    st.sampled_from(JSON_POOL),
    st.sampled_from(JSON_POOL),
    st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.sampled_from(KEYS), text), inner, max_size=3)
        ),
        max_leaves=4,
    ),
)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@st.composite
def records(draw, fields: list[str]) -> str:
    """One JSONL line: mostly a record with (perturbed) ``fields``, sometimes anything."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(text)
    if kind == 1:
        return dumps(draw(json_values))
    row = {}
    for field in fields:
        choice = draw(st.integers(0, 11))
        if choice == 0:
            continue
        row[field] = draw(json_values) if choice == 1 else draw(ids)
    if draw(st.integers(0, 7)) == 0:
        row[draw(st.sampled_from(KEYS))] = draw(scalars)
    return dumps(row)


def lines_of(line: st.SearchStrategy[str], max_size: int = 5) -> st.SearchStrategy[str]:
    return st.builds(
        lambda ls, end: "\n".join(ls) + end,
        st.lists(line, max_size=max_size),
        st.sampled_from(["", "\n", "\n\n", "\r\n"]),
    )


def separated(separator: str, max_fields: int = 6) -> st.SearchStrategy[str]:
    field = st.one_of(
        ids,
        st.integers(-2, 5).map(str),
        st.floats(allow_nan=True).map(str),
        text,
        st.sampled_from(['"', '"a', 'a"b', "Q0", "0"]),
    )
    return st.lists(field, max_size=max_fields).map(separator.join)


def tsv_qrels() -> st.SearchStrategy[str]:
    header = st.sampled_from(["query-id\tcorpus-id\tscore", "query-id\tcorpus-id", "qid\tdocid\trel", ""])
    return st.builds(lambda h, body: h + "\n" + body, header, lines_of(separated("\t"), 6))


def trec_lines(fields: int) -> st.SearchStrategy[str]:
    good = st.builds(
        lambda q, d, n, s: " ".join(
            [q, "Q0" if fields == 6 else "0", d, *([str(n), str(s), "t"] if fields == 6 else [str(n)])]
        ),
        st.sampled_from(["q1", "q2"]),
        st.sampled_from(["d1", "d2", "d3"]),
        st.integers(-1, 3),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers()),
    )
    return lines_of(st.one_of(good, good, separated(" "), separated("\t")), 8)


class Sandbox:
    """One folder per property, emptied after each example; :meth:`run` fails if the loader wrote a file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.inputs = root / "in"
        self.inputs.mkdir()
        self.written: list[Path] = []

    def write(self, relative: str, content: str | bytes) -> Path:
        path = self.inputs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        self.written.append(path)
        return path

    def run(self, load: Callable[[], Any]) -> None:
        before = _listing(self.root)
        try:
            load()
        except EmbedscopeError as e:
            assert str(e).strip() and "Traceback" not in str(e)
        finally:
            after = _listing(self.root)
            for path in self.written:
                path.unlink(missing_ok=True)
            self.written = []
            assert after == before, f"the loader wrote {sorted(set(after) - set(before))}"


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def box(tmp_path, monkeypatch):
    """The sandbox, which is also the working directory (so a relative write would show)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return Sandbox(tmp_path)


# -- BEIR and EvalScope folders --------------------------------------------------------------------

corpus_lines = lines_of(records(["_id", "title", "text"]))
query_lines = lines_of(records(["_id", "text"]))


@pytest.mark.slow
@fuzz("beir")
@given(
    corpus=corpus_lines,
    queries=query_lines,
    qrels=tsv_qrels(),
    qrels_name=st.sampled_from(["test", "dev"]),
    split=st.sampled_from(["test", "dev"]),
    drop=st.sampled_from([None, "corpus.jsonl", "queries.jsonl"]),
)
def test_beir_folder(box, corpus, queries, qrels, qrels_name, split, drop):
    from embedscope.data.detect import load_retrieval

    for name, content in (("corpus.jsonl", corpus), ("queries.jsonl", queries), (f"qrels/{qrels_name}.tsv", qrels)):
        if name != drop:
            box.write(name, content)
    box.run(lambda: load_retrieval(box.inputs, split=split))


@pytest.mark.slow
@fuzz("evalscope")
@given(
    corpus=corpus_lines,
    queries=query_lines,
    qrels=lines_of(records(["query-id", "corpus-id", "score"])),
    split=st.sampled_from(["test", "test", "dev"]),
)
def test_evalscope_folder(box, corpus, queries, qrels, split):
    from embedscope.data.beir import load_text_folder

    box.write("corpus.jsonl", corpus)
    box.write("queries.jsonl", queries)
    box.write("qrels.jsonl", qrels)
    box.run(lambda: load_text_folder(box.inputs, split=split))


# -- tables: CSV / TSV / JSONL / Parquet with column mappings ----------------------------------------

column_maps = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(
            [
                "id",
                "text",
                "title",
                "corpus.id",
                "queries.text",
                "query-id",
                "corpus-id",
                "score",
                "qrels.score",
                "query",
                "positive",
                "negative",
                "doc_id",
                "qid",
                "bogus",
            ]
        ),
        st.one_of(st.sampled_from(KEYS), text),
        max_size=3,
    ),
)


def csv_table(columns: list[str]) -> st.SearchStrategy[str]:
    valid = ",".join(columns)
    header = st.one_of(
        st.just(valid),
        st.just(valid),
        st.lists(st.one_of(st.sampled_from(columns + KEYS), text), max_size=4).map(",".join),
    )
    row = st.one_of(
        st.lists(
            st.sampled_from(["q1", "d1", "d2", "1", "0", "x y"]), min_size=len(columns), max_size=len(columns)
        ).map(",".join),
        separated(",", 4),
    )
    return st.builds(lambda h, body: h + "\n" + body, header, lines_of(row, 5))


TABLES = {"corpus": ["_id", "text", "title"], "queries": ["_id", "text"], "qrels": ["query-id", "corpus-id", "score"]}


@pytest.mark.slow
@fuzz("tables")
@given(
    layout=st.sampled_from(["folder-csv", "pairs-csv", "pairs-jsonl", "pairs-tsv"]), columns=column_maps, data=st.data()
)
def test_tables(box, layout, columns, data):
    from embedscope.data.detect import load_retrieval

    if layout == "folder-csv":  # drawn before anything is written: a draw can end the example
        files = {f"{name}.csv": data.draw(csv_table(fields)) for name, fields in TABLES.items()}
    elif layout == "pairs-jsonl":
        files = {"pairs.jsonl": data.draw(lines_of(records(["query", "positive", "negative"])))}
    else:
        table = data.draw(csv_table(["query", "positive", "negative"]))
        files = {"pairs.csv": table} if layout == "pairs-csv" else {"pairs.tsv": table.replace(",", "\t")}
    paths = [box.write(name, content) for name, content in files.items()]
    target = box.inputs if layout == "folder-csv" else paths[0]
    box.run(lambda: load_retrieval(target, columns=columns))


arrow_columns = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["str", "int", "float", "bytes", "null", "list"])),
    max_size=4,
    unique_by=lambda c: c[0],
)


def _arrow_table(spec: list[tuple[str, str]], rows: int, seed: int):
    import pyarrow as pa

    values = {
        "str": lambda i: f"v{(i + seed) % 3}",
        "int": lambda i: (i + seed) % 4 - 1,
        "float": lambda i: [0.5, float("nan"), 1.0, float("inf")][(i + seed) % 4],
        "bytes": lambda i: b"\xff\x00" if (i + seed) % 2 else b"ok",
        "null": lambda i: None,
        "list": lambda i: [f"x{i}"],
    }
    return pa.table({name: [values[kind](i) for i in range(rows)] for name, kind in spec})


@fuzz("parquet")
@given(
    layout=st.sampled_from(["folder", "pairs"]),
    corpus=arrow_columns,
    queries=arrow_columns,
    qrels=arrow_columns,
    rows=st.integers(0, 4),
    seed=st.integers(0, 3),
    truncate=st.integers(-1, 60),
    columns=column_maps,
)
@pytest.mark.slow
def test_parquet(box, layout, corpus, queries, qrels, rows, seed, truncate, columns):
    import io

    import pyarrow.parquet as pq

    from embedscope.data.detect import load_retrieval

    def parquet(spec) -> bytes:
        buffer = io.BytesIO()
        pq.write_table(_arrow_table(spec, rows, seed), buffer)
        data = buffer.getvalue()
        return data[:truncate] if truncate >= 0 else data

    if layout == "folder":
        for name, spec in (("corpus", corpus), ("queries", queries), ("qrels", qrels)):
            box.write(f"{name}.parquet", parquet(spec))
        target = box.inputs
    else:
        target = box.write("pairs.parquet", parquet(corpus))
    box.run(lambda: load_retrieval(target, columns=columns))


# -- qrels and run files ---------------------------------------------------------------------------

qrels_texts = st.one_of(
    trec_lines(4),
    tsv_qrels(),
    lines_of(records(["query-id", "corpus-id", "score"])),
    st.builds(dumps, json_values),
    st.builds(dumps, st.dictionaries(ids, st.dictionaries(ids, scalars, max_size=3), max_size=3)),
)
run_texts = st.one_of(
    trec_lines(6),
    trec_lines(6),
    st.builds(dumps, json_values),
    st.builds(dumps, st.dictionaries(ids, st.dictionaries(ids, scalars, max_size=3), max_size=3)),
)


@pytest.mark.slow
@fuzz("qrels")
@given(content=qrels_texts, name=st.sampled_from(["qrels.txt", "qrels.tsv", "qrels.json", "qrels.jsonl"]))
def test_qrels_file(box, content, name):
    from embedscope.data.runs import read_qrels

    path = box.write(name, content)
    box.run(lambda: read_qrels(path))


@pytest.mark.slow
@fuzz("runs")
@given(content=run_texts, name=st.sampled_from(["run.trec", "run.txt", "run.json"]), ranked=st.booleans())
def test_run_file(box, content, name, ranked):
    from embedscope.data.runs import read_ranked_run, read_run

    path = box.write(name, content)
    box.run(lambda: read_ranked_run(path) if ranked else read_run(path))


# -- config files (native and EvalScope schemas) -------------------------------------------------------

CONFIG_KEYS = [
    "model",
    "models",
    "pipeline",
    "pipelines",
    "model_options",
    "tasks",
    "custom_tasks",
    "output_folder",
    "batch_size",
    "top_k",
    "overwrite",
    "name",
    "data_path",
    "eval_splits",
    "columns",
    "type",
    "retriever",
    "retrievers",
    "fusion",
    "reranker",
    "eval_backend",
    "eval_config",
    "eval",
    "tool",
    "task_names",
    "dataset_path",
    "limits",
    "model_name_or_path",
    "is_cross_encoder",
    "pooling_mode",
    "max_seq_length",
    "prompt",
    "prompts",
    "work_dir",
    "device",
    "dtype",
    "main_score",
]
config_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(CONFIG_KEYS), inner, max_size=4)
    ),
    max_leaves=10,
)


@st.composite
def configs(draw) -> dict:
    schema = draw(st.sampled_from(["native", "evalscope", "evalscope-task", "any"]))
    task = st.fixed_dictionaries(
        {"name": ids, "data_path": ids},
        optional={
            "eval_splits": config_values,
            "type": st.one_of(st.sampled_from(["Retrieval", "STS", "Bogus"]), scalars),
            "columns": config_values,
        },
    )
    if schema == "native":
        return draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "model": st.one_of(ids, config_values),
                    "tasks": config_values,
                    "custom_tasks": st.lists(st.one_of(task, config_values), max_size=2),
                    "output_folder": st.one_of(ids, scalars),
                    "pipeline": config_values,
                    "batch_size": scalars,
                },
            )
        )
    evalscope = st.fixed_dictionaries(
        {},
        optional={
            "tool": st.one_of(st.just("MTEB"), scalars),
            "models": st.lists(config_values, max_size=2),
            "eval": st.one_of(
                config_values,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "custom_tasks": st.lists(st.one_of(task, config_values), max_size=2),
                        "task_names": config_values,
                        "output_folder": scalars,
                        "limits": scalars,
                    },
                ),
            ),
        },
    )
    if schema == "evalscope":
        return {"eval": {}, **draw(evalscope)}
    if schema == "evalscope-task":
        return {"eval_backend": draw(st.one_of(st.just("RAGEval"), scalars)), "eval_config": draw(evalscope)}
    return draw(st.dictionaries(st.sampled_from(CONFIG_KEYS), config_values, max_size=4))


@pytest.mark.slow
@fuzz("config")
@given(config=configs(), as_yaml=st.booleans(), garbage=st.one_of(st.none(), text))
def test_config_file(box, config, as_yaml, garbage):
    import yaml

    from embedscope.settings.files import load_settings

    if garbage is not None and garbage.strip():
        content = garbage
    else:
        content = yaml.safe_dump(config, allow_unicode=True) if as_yaml else dumps(config)
    path = box.write("config.yaml" if as_yaml else "config.json", content)
    box.run(lambda: load_settings(path))


# -- fastbook benchmark JSON and notebooks -------------------------------------------------------------

component = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "component": text,
            "context": st.one_of(st.lists(text, max_size=2), json_values),
            "explicit_context": st.one_of(st.booleans(), scalars),
            "extraneous": st.one_of(st.booleans(), scalars),
        },
    ),
)
question = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "chapter": st.one_of(st.integers(0, 3), scalars),
            "question_number": st.one_of(st.integers(0, 3), scalars),
            "question_text": st.one_of(text, scalars),
            "answer_context": st.one_of(st.lists(component, max_size=3), scalars),
        },
        optional={
            "gold_standard_answer": st.one_of(text, scalars),
            "question_context": st.one_of(
                st.lists(
                    st.one_of(json_values, st.fixed_dictionaries({"question_component": text, "context": json_values})),
                    max_size=2,
                ),
                scalars,
            ),
        },
    ),
)


@pytest.mark.slow
@fuzz("fastbook")
@given(
    data=st.one_of(st.fixed_dictionaries({"questions": st.lists(question, max_size=3)}), json_values),
    raw=st.one_of(st.none(), text),
)
def test_fastbook_json(box, data, raw):
    from embedscope.studies.fastbook.data import benchmark_stats, load_benchmark

    path = box.write("benchmark.json", raw if raw is not None and raw.strip() else dumps(data))
    box.run(lambda: benchmark_stats(load_benchmark(path)))


cell = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"cell_type": st.one_of(st.sampled_from(["markdown", "code", "raw"]), scalars)},
        optional={
            "source": st.one_of(text, st.lists(st.one_of(text, scalars), max_size=3), scalars),
            "outputs": json_values,
        },
    ),
)


@fuzz("notebooks")
@given(
    notebook=st.one_of(st.fixed_dictionaries({"cells": st.lists(cell, max_size=4)}), json_values),
    markdown=st.text(st.sampled_from("#\n abc*`-_|\t"), max_size=60),
    suffix=st.sampled_from([".ipynb", ".md"]),
    paragraphs=st.integers(1, 3),
)
@example(
    notebook={"cells": [{"cell_type": "markdown", "source": [None]}]}, markdown="", suffix=".ipynb", paragraphs=1
)  # found by this fuzzer: was a TypeError
def test_notebook(box, notebook, markdown, suffix, paragraphs):
    from embedscope.data.documents import chunk_documents

    path = box.write(f"01_intro{suffix}", dumps(notebook) if suffix == ".ipynb" else markdown)
    box.run(lambda: chunk_documents([path], ChunkingSettings(method="paragraphs", paragraphs=paragraphs).options()))
