"""The fastbook study on small notebooks and a small benchmark built here, with hand-checked scores."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.data.documents import (
    STUDY_REFERENCE,
    chunk_documents,
    chunk_tokens,
    read_notebook,
    read_passages,
    write_passages,
)
from embedscope.errors import ConfigError, DataFormatError, ResultExistsError
from embedscope.retrieval.dense import DenseRetriever
from embedscope.retrieval.late_interaction import LateInteraction
from embedscope.retrieval.pipeline import Pipeline
from embedscope.settings.run import ChunkingSettings
from embedscope.studies.fastbook.data import benchmark_stats, load_benchmark, parse_benchmark, read_keyword_queries
from embedscope.studies.fastbook.metrics import modified_mrr, modified_recall
from embedscope.studies.fastbook.run import run_fastbook
from embedscope.testing.fakes import KeywordEncoder, WordTokenEncoder


def _cell(kind: str, source: str, outputs: list | None = None) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(outputs=outputs or [], execution_count=1)
    return cell


def _notebook(path: Path, cells: list[dict]) -> Path:
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _component(text, context, explicit="true", extraneous="false"):
    return {
        "answer_component": text,
        "scoring_type": "simple",
        "context": context,
        "explicit_context": explicit,
        "extraneous_answer": extraneous,
    }


BENCHMARK = {
    "questions": [
        {
            "chapter": 1,
            "question_number": 1,
            "question_text": '"Why do cats purr?"',
            "gold_standard_answer": "...",
            "answer_context": [
                _component("happy", ["Cats purr when they are happy"]),
                _component("dogs", ["Dogs bark"], extraneous="true"),
            ],
            "question_context": [],
        },
        {
            "chapter": 1,
            "question_number": 2,
            "question_text": "What do fish do?",
            "gold_standard_answer": "...",
            "answer_context": [_component("schools", ["Fish swim in schools"]), _component("?", [], explicit="false")],
            "question_context": [],
        },
        {
            "chapter": 2,
            "question_number": 1,
            "question_text": "What is a model?",
            "gold_standard_answer": "...",
            "answer_context": [
                _component("maps", ["A model maps inputs"]),
                _component("weights", ["Training adjusts the weights"]),
            ],
            "question_context": [],
        },
        {
            "chapter": 2,
            "question_number": 2,
            "question_text": "Where is good coffee?",
            "gold_standard_answer": "...",
            "answer_context": [_component("cafe", ["The cafÃ© serves"])],
            "question_context": [],
        },  # mojibake: ftfy repairs it
        {
            "chapter": 2,
            "question_number": 3,
            "question_text": "What comes after outputs?",
            "gold_standard_answer": "...",
            "answer_context": [_component("split", ["to outputs. Training adjusts"])],
            "question_context": [],
        },  # spans 2 chunks
    ]
}
KEYWORDS = {(1, 1): "purr", (1, 2): "fish", (2, 1): '"model, weights"', (2, 2): "coffee", (2, 3): "outputs training"}


@pytest.fixture()
def study(tmp_path):
    docs = tmp_path / "notebooks"
    docs.mkdir()
    _notebook(
        docs / "01_pets.ipynb",
        [
            _cell("markdown", "# Chapter 1: Pets\n\nCats purr when they are happy.\n\nDogs bark at strangers."),
            _cell(
                "code",
                "print('hello')",
                outputs=[{"output_type": "stream", "name": "stdout", "text": ["NOT-IN-TEXT\n"]}],
            ),
            _cell("markdown", "Fish swim in schools for safety."),
            _cell("markdown", "## Questionnaire\n\n1. Why do cats purr?"),
            _cell("markdown", "After the questionnaire"),
        ],
    )
    _notebook(
        docs / "02_models.ipynb",
        [
            _cell(
                "markdown",
                "# Chapter 2: Models\n\nA model maps inputs to outputs.\n\nTraining adjusts the weights of the model.",
            ),
            _cell("markdown", "The café serves “good” coffee."),
        ],
    )
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(BENCHMARK))
    queries = tmp_path / "keywords.csv"
    with queries.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["chapter", "question_number", "question_text", "keywords"])
        for (c, n), kw in KEYWORDS.items():
            w.writerow([c, n, "...", kw])
    return docs, bench, queries


PARAGRAPHS = ChunkingSettings(method="paragraphs", paragraphs=1).options()


def test_notebook_reading_drops_outputs_and_stops_at_the_questionnaire(study):
    docs, _, _ = study
    text = read_notebook(docs / "01_pets.ipynb")
    assert text == (
        "# Chapter 1: Pets\n\nCats purr when they are happy.\n\nDogs bark at strangers.\n"
        "print('hello')\nFish swim in schools for safety.\n"
    )
    assert "After the questionnaire" in read_notebook(docs / "01_pets.ipynb", stop_at=None)
    passages = chunk_documents([docs], PARAGRAPHS)
    assert [p.id for p in passages][:3] == ["01_pets-0000", "01_pets-0001", "01_pets-0002"]
    assert {p.chapter for p in passages} == {1, 2} and passages[0].source == "01_pets.ipynb"
    no_headers = chunk_documents(
        [docs], ChunkingSettings(method="paragraphs", paragraphs=2, keep_headers=False).options()
    )
    assert (
        no_headers[0].text
        == "Cats purr when they are happy.\n\nDogs bark at strangers.\nprint('hello')\nFish swim in schools for safety."
    )


def test_token_windows_respect_size_and_overlap():
    from llama_index.core.utils import get_tokenizer

    sentences = [f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(120)]
    chunks = chunk_tokens(" ".join(sentences), chunk_size=100, overlap=20)
    count = get_tokenizer()
    assert len(chunks) > 5 and all(len(count(c)) <= 100 for c in chunks)
    assert all(s in " ".join(chunks) for s in sentences)  # nothing lost
    assert any(chunks[0].split()[-1] in chunks[1] for _ in [0])  # neighbours share text
    with pytest.raises(DataFormatError, match="smaller than the chunk size"):
        chunk_tokens("x", chunk_size=10, overlap=10)
    from embedscope.models.specs import tokenizer_location

    minilm = chunk_tokens(" ".join(sentences), chunk_size=100, overlap=0, tokenizer=tokenizer_location("minilm"))
    assert len(minilm) > 5


def test_benchmark_loading_validation_and_stats(study, tmp_path):
    _, bench, queries = study
    b = load_benchmark(bench)
    assert b.questions[0].components[1].extraneous_answer is True and b.questions[0].query_text == "Why do cats purr?"
    stats = benchmark_stats(b)
    assert stats["1"] == {
        "questions": 2,
        "answer components": 4,
        "avg components per question": 2.0,
        "empty contexts": 1,
        "implicit components": 1,
        "extraneous components": 1,
    }
    assert stats["Total"]["answer components"] == 8 and stats["Total"]["avg components per question"] == 1.6
    bad = json.loads(json.dumps(BENCHMARK))
    bad["questions"][2]["answer_context"][1]["explicit_context"] = "yes"
    with pytest.raises(
        DataFormatError, match=r"questions\[2\] \(chapter 2, question 1\)\.answer_context\[1\]\.explicit_context"
    ):
        parse_benchmark(bad, "b.json")
    bad["questions"][2] = {"chapter": 2}
    with pytest.raises(DataFormatError, match="missing field"):
        parse_benchmark(bad)
    assert read_keyword_queries(queries, b)["2-1"] == '"model, weights"'


def test_metrics_by_hand():
    from embedscope.studies.fastbook.data import AnswerComponent

    a = AnswerComponent("a", "simple", ("alpha",), True, False)
    b = AnswerComponent("b", "simple", ("beta", "gamma"), True, False)
    empty = AnswerComponent("c", "simple", (), False, False)
    passages = ["zero", "gamma ray", "x", "alpha"]
    assert modified_mrr([a, b], passages, 10) == 0.25 and modified_recall([a, b], passages, 10) == 1.0
    assert modified_mrr([a, b], passages, 3) == 0.0 and modified_recall([a, b], passages, 3) == 0.5
    assert modified_mrr([a, empty], passages, 10) == 0.0 and modified_recall([a, empty], passages, 10) == 0.5
    assert modified_recall([AnswerComponent("m", "simple", ("cafÃ©",), True, False)], ["a café"], 10) == 1.0


def test_fts5_keywords_chapter_scope_hand_checked(study, tmp_path):
    docs, bench, queries = study
    b = load_benchmark(bench)
    passages = chunk_documents([docs], PARAGRAPHS)
    report = run_fastbook(
        b, passages, "fts5", keywords=read_keyword_queries(queries, b), k=10, output_folder=tmp_path / "out"
    )
    got = {
        (r["chapter"], r["question_number"]): (r["modified_mrr_at_10"], r["modified_recall_at_10"]) for r in report.rows
    }
    # 1-1 finds the cats passage only (the extraneous dogs component is missed); 1-2's second component has
    # no context; 2-1: both found, the weights passage first (rank 1) and the maps passage second (rank 2);
    # 2-2 found through ftfy; 2-3's context spans two passages, so it is never found.
    assert got == {(1, 1): (0.0, 0.5), (1, 2): (0.0, 0.5), (2, 1): (0.5, 1.0), (2, 2): (1.0, 1.0), (2, 3): (0.0, 0.0)}
    assert report.overall["modified_mrr_at_10"] == pytest.approx(0.3)
    assert report.overall["modified_recall_at_10"] == pytest.approx(0.6)
    assert report.per_chapter[2]["modified_recall_at_10"] == pytest.approx(2 / 3)
    stored = json.loads(report.path.read_text())
    subsets = {e["hf_subset"]: e["main_score"] for e in stored["scores"]["test"]}
    assert subsets == {"default": pytest.approx(0.3), "chapter_1": 0.0, "chapter_2": 0.5}
    assert report.csv_path.read_text().startswith("chapter,question_number,components,modified_mrr_at_10")
    with pytest.raises(ResultExistsError):
        run_fastbook(b, passages, "fts5", keywords=read_keyword_queries(queries, b), output_folder=tmp_path / "out")
    strict = run_fastbook(
        b, passages, "fts5", keywords=read_keyword_queries(queries, b), exclude_extraneous=True, exclude_implicit=True
    )
    got = {(r["chapter"], r["question_number"]): r["modified_mrr_at_10"] for r in strict.rows}
    assert got[(1, 1)] == 1.0 and got[(1, 2)] == 1.0


def test_every_retriever_runs_the_study(study):
    docs, bench, _ = study
    b = load_benchmark(bench)
    passages = chunk_documents([docs], PARAGRAPHS)
    words = ["cats", "purr", "fish", "model", "coffee", "outputs", "dogs"]
    # lexical retrievers return only passages sharing a word with "Why do cats purr?" (not the dogs one);
    # dense and late-interaction search rank all 3 passages of chapter 1
    for retriever, recall in (
        ("bm25", 0.5),
        ("fts5", 0.5),
        (Pipeline([DenseRetriever(KeywordEncoder(words))]), 1.0),
        (Pipeline([LateInteraction(WordTokenEncoder())]), 1.0),
    ):
        report = run_fastbook(b, passages, retriever, k=10)
        rows = {(r["chapter"], r["question_number"]): r for r in report.rows}
        assert rows[(1, 1)]["modified_recall_at_10"] == recall
        assert rows[(2, 3)]["modified_recall_at_10"] == 0.0  # the split context is never found
    whole = run_fastbook(b, passages, "bm25", scope="all", k=1)
    assert whole.overall["questions"] == 5


@pytest.mark.slow
def test_cli_stats_chunk_run_and_beir_export(study, tmp_path, capsys):
    docs, bench, queries = study
    assert main(["fastbook", "stats", str(bench)]) == 0
    out = capsys.readouterr().out
    assert "| Total | 5 | 8 | 1.6 | 1 | 1 | 1 |" in out
    corpus = tmp_path / "corpus.jsonl"
    assert main(["chunk", str(docs), "-o", str(corpus), "--chunking", "paragraphs"]) == 0
    assert len(read_passages(corpus)) == 6
    args = [
        "fastbook",
        "run",
        "--benchmark",
        str(bench),
        "--passages",
        str(corpus),
        "--retriever",
        "fts5",
        "--queries",
        str(queries),
        "--scope",
        "chapter",
        "--k",
        "10",
    ]
    assert main(args) == 0
    assert "| all | 5 | 0.3000 | 0.6000 |" in capsys.readouterr().out
    assert (
        main(
            [
                "fastbook",
                "run",
                "--benchmark",
                str(bench),
                "--notebooks",
                str(docs),
                "--retriever",
                "bm25",
                "--queries",
                str(queries),
            ]
        )
        == 2
    )
    assert "fts5 retriever only" in capsys.readouterr().err
    beir = tmp_path / "beir"
    assert main(["fastbook", "export-beir", "--benchmark", str(bench), "--passages", str(corpus), "-o", str(beir)]) == 0
    qrels = (beir / "qrels" / "test.tsv").read_text().splitlines()
    assert "1-1\t01_pets-0001\t1" in qrels and "1-1\t01_pets-0002\t1" in qrels
    assert not any(line.startswith("2-3\t") for line in qrels)  # a split context makes no passage relevant
    import embedscope

    report = embedscope.evaluate("fts5", [str(beir)], output_folder=tmp_path / "res", cache=False, show_progress=False)
    assert 0 < report.outcomes[0].result.main_score() <= 1


def test_passages_round_trip(tmp_path, study):
    docs, _, _ = study
    passages = chunk_documents([docs], PARAGRAPHS)
    write_passages(passages, tmp_path / "c.jsonl")
    assert read_passages(tmp_path / "c.jsonl") == passages


def test_fastbook_results_load_with_mteb(study, tmp_path):
    pytest.importorskip("mteb")
    from support.mteb_results import mteb_file_scores, mteb_folder_scores

    docs, bench, queries = study
    b = load_benchmark(bench)
    report = run_fastbook(
        b,
        chunk_documents([docs], PARAGRAPHS),
        "fts5",
        keywords=read_keyword_queries(queries, b),
        k=10,
        output_folder=tmp_path / "out",
    )
    scores = mteb_file_scores(tmp_path / "out")
    assert list(scores) == [report.path]
    entries = json.loads(report.path.read_text())["scores"]["test"]
    assert scores[report.path] == pytest.approx(sum(e["main_score"] for e in entries) / len(entries))
    assert list(mteb_folder_scores(tmp_path / "out").values()) == [scores[report.path]]


def _published_shapes() -> dict:
    """The benchmark with the published file's shapes: question_context objects, a list-valued answer_component."""
    data = json.loads(json.dumps(BENCHMARK))
    data["questions"][0]["question_context"] = [{"question_component": "purring", "context": ["Cats purr", "loudly"]}]
    data["questions"][2]["answer_context"][1]["answer_component"] = ["Training adjusts", "the weights"]
    return data


def test_published_shapes_load_and_keep_their_parts(study, tmp_path):
    data = _published_shapes()
    b = parse_benchmark(data, "b.json")
    (qc,) = b.questions[0].question_context
    assert (qc.question_component, qc.context) == ("purring", ("Cats purr", "loudly"))
    comp = b.questions[2].components[1]
    assert (
        comp.parts == ("Training adjusts", "the weights") and comp.answer_component == "Training adjusts\nthe weights"
    )
    assert b.questions[2].components[0].parts == ()
    assert benchmark_stats(b) == benchmark_stats(parse_benchmark(BENCHMARK))  # a list is one component
    docs, _, _ = study
    path = tmp_path / "published.json"
    path.write_text(json.dumps(data))
    report = run_fastbook(load_benchmark(path), chunk_documents([docs], PARAGRAPHS), "bm25", k=10)
    assert report.overall["questions"] == 5


def test_a_component_without_flags_is_implicit_only_when_its_context_is_empty():
    """The published file has two components without ``explicit_context`` (chapter 2, questions 14 and 27); the
    benchmark's README counts the one with an empty context as implicit (41 in all, not 40)."""
    base = benchmark_stats(parse_benchmark(BENCHMARK))["Total"]["implicit components"]
    data = json.loads(json.dumps(BENCHMARK))
    component = data["questions"][0]["answer_context"][0]
    del component["explicit_context"]
    assert parse_benchmark(data).questions[0].components[0].explicit_context  # it has a context
    component["context"] = []
    assert not parse_benchmark(data).questions[0].components[0].explicit_context
    assert benchmark_stats(parse_benchmark(data))["Total"]["implicit components"] == base + 1
    component["explicit_context"] = "true"  # an explicit flag still wins
    assert parse_benchmark(data).questions[0].components[0].explicit_context


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("question_context", ["a string"], r"question_context\[0\]: expected an object, got str"),
        ("question_context", [{"question_component": "x"}], r"question_context\[0\]: missing field\(s\) \['context'\]"),
        (
            "question_context",
            [{"question_component": 1, "context": []}],
            r"question_context\[0\]\.question_component: expected a string, got int",
        ),
        (
            "question_context",
            [{"question_component": "x", "context": [1]}],
            r"question_context\[0\]\.context\[0\]: expected a string, got int",
        ),
        ("question_context", {"question_component": "x"}, r"question_context: expected a list"),
        ("answer_component", ["ok", 3], r"answer_context\[0\]\.answer_component\[1\]: expected a string, got int"),
        ("answer_component", [], r"answer_context\[0\]\.answer_component: expected a string or a non-empty list"),
        (
            "answer_component",
            {"a": 1},
            r"answer_context\[0\]\.answer_component: expected a string or a list of strings, "
            "got dict",
        ),
    ],
)
def test_other_shapes_are_rejected_naming_the_field(field, value, message):
    data = _published_shapes()
    question = data["questions"][1]
    if field == "question_context":
        question["question_context"] = value
    else:
        question["answer_context"][0]["answer_component"] = value
    with pytest.raises(DataFormatError, match=r"b.json: questions\[1\] \(chapter 1, question 2\)\." + message):
        parse_benchmark(data, "b.json")


def test_cli_stats_and_run_on_published_shapes(study, tmp_path, capsys):
    docs, _, _ = study
    path = tmp_path / "published.json"
    path.write_text(json.dumps(_published_shapes()))
    assert main(["fastbook", "stats", str(path)]) == 0
    assert "| Total | 5 | 8 | 1.6 | 1 | 1 | 1 |" in capsys.readouterr().out
    assert (
        main(
            [
                "fastbook",
                "run",
                "--benchmark",
                str(path),
                "--notebooks",
                str(docs),
                "--chunking",
                "paragraphs",
                "--retriever",
                "bm25",
            ]
        )
        == 0
    )
    assert "| all | 5 |" in capsys.readouterr().out


def _long_notebook(path: Path, code_suffix: str = "") -> Path:
    sentences = [f"Sentence {i} explains how layer {i % 13} of the network learns feature {i * 7}." for i in range(400)]
    cells = [_cell("markdown", " ".join(sentences[i : i + 20])) for i in range(0, 400, 20)]
    cells.insert(5, _cell("code", "learn = vision_learner(dls, resnet34)\nlearn.fine_tune(1)" + code_suffix))
    cells.append(_cell("markdown", "## Questionnaire\n\n1. Not a passage?"))
    return _notebook(path, cells)


@pytest.mark.slow
@pytest.mark.parametrize(("code_suffix", "odd"), [("", True), ("#", False)])
def test_fastbook_reference_chunks_each_half_separately(tmp_path, code_suffix, odd):
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.utils import get_tokenizer

    from embedscope.data.documents import halves

    path = _long_notebook(tmp_path / "01_intro.ipynb", code_suffix)
    text = read_notebook(path)
    assert len(text) % 2 == odd
    half = int(len(text) / 2)
    pieces = halves(text)
    assert pieces == [text[:half], text[half : 2 * half]] + ([text[-1]] if odd else [])  # odd: a 1-character third
    splitter = SentenceSplitter(chunk_size=500, chunk_overlap=64, tokenizer=get_tokenizer())
    expected = [c for piece in pieces for c in splitter.split_text(piece) if c.strip()]
    passages = chunk_documents([path], ChunkingSettings(method="fastbook-reference").options())
    assert [p.text for p in passages] == expected
    assert [p.text for p in passages] != [c for c in splitter.split_text(text) if c.strip()]  # the cut matters
    assert passages[-1].id == f"01_intro-{len(expected) - 1:04d}" and {p.chapter for p in passages} == {1}
    assert not any("Questionnaire" in p.text for p in passages)


def test_halves_rule():
    from embedscope.data.documents import halves

    assert halves("abcdef") == ["abc", "def"] and halves("abcdefg") == ["abc", "def", "g"]
    assert halves("a") == ["a"] and halves("") == []


@pytest.mark.slow
def test_fastbook_reference_keeps_the_study_overlap_and_is_the_default_of_fastbook_run(study, tmp_path, capsys):
    docs, bench, _ = study
    reference = dataclasses.replace(STUDY_REFERENCE, method="fastbook-reference")
    with pytest.raises(
        ConfigError, match="min.size/4, size/2, 64. = 25 at chunking.chunk_size 100, not chunking.overlap 64"
    ):
        dataclasses.replace(reference, chunk_size=100, overlap=64)
    with pytest.raises(ConfigError, match="counts tokens with cl100k_base"):
        dataclasses.replace(reference, tokenizer="bert.json")
    assert ChunkingSettings(method="fastbook-reference", chunk_size=100, overlap=25).options().split("x") == ["x"]
    path = _long_notebook(docs / "03_long.ipynb")
    corpus = tmp_path / "c.jsonl"
    assert main(["chunk", str(path), "-o", str(corpus), "--chunking", "fastbook-reference"]) == 0
    reference = read_passages(corpus)
    assert reference == chunk_documents([path], ChunkingSettings(method="fastbook-reference").options())
    assert reference != chunk_documents([path], ChunkingSettings().options())
    assert (
        main(["chunk", str(path), "-o", str(corpus), "--chunking", "fastbook-reference", "--chunk-overlap", "10"]) == 2
    )
    assert "the study's overlap min(size/4, size/2, 64) = 64 at --chunk-size 500, not --chunk-overlap 10" in (
        capsys.readouterr().err
    )
    assert (
        main(["chunk", str(path), "-o", str(corpus), "--chunking", "fastbook-reference", "--chunk-overlap", "64"]) == 0
    )
    assert read_passages(corpus) == reference  # the rule's own value, given, is the default
    assert main(["chunk", str(path), "-o", str(corpus), "--chunking", "fastbook-reference"]) == 0
    assert read_passages(corpus) == reference
    from embedscope.cli.main import build_parser

    parse = build_parser().parse_args
    assert parse(
        ["fastbook", "run", "--benchmark", "b.json", "--notebooks", "nb", "--retriever", "bm25"]
    ).default_chunking == ("fastbook-reference")
    assert parse(["chunk", "nb", "-o", "c.jsonl"]).default_chunking == "tokens"  # the chunk command keeps plain windows
    export = tmp_path / "beir"
    assert (
        main(["fastbook", "export-beir", "--benchmark", str(bench), "--notebooks", str(path), "-o", str(export)]) == 0
    )
    assert read_passages(export / "corpus.jsonl") == reference  # fastbook commands chunk the reference way by default


class _RecordingRetriever:
    """Records the query texts it is asked for; returns every passage in corpus order."""

    name = "recorder"
    fingerprint = "recorder"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def retrieve(self, queries, corpus, options):
        import numpy as np

        from embedscope.types import RankedRun

        self.queries += list(queries.texts)
        n, depth = len(queries), min(len(corpus), options.top_k)
        index = np.tile(np.arange(depth, dtype=np.int64), (n, 1))
        return RankedRun(queries.ids, corpus.ids, index, -index.astype(float))


def test_question_queries_strip_the_surrounding_quotes(study):
    docs, bench, _ = study
    recorder = _RecordingRetriever()
    run_fastbook(load_benchmark(bench), chunk_documents([docs], PARAGRAPHS), Pipeline([recorder]), k=10)
    assert "Why do cats purr?" in recorder.queries and not any(q.startswith('"') for q in recorder.queries)


def test_fused_retrievers_run_the_study_as_run_does(study, tmp_path, capsys):
    docs, bench, queries = study
    b = load_benchmark(bench)
    passages = chunk_documents([docs], PARAGRAPHS)
    keywords = read_keyword_queries(queries, b)
    fused = run_fastbook(b, passages, ["bm25", "fts5"], fusion="rrf", keywords=keywords, k=10)
    assert fused.pipeline == "bm25-lucene+fts5_rrf-k60"
    expected = Pipeline.build(["bm25", {"type": "fts5", "keywords": keywords}], fusion="rrf")
    same = run_fastbook(b, passages, expected, k=10)
    assert fused.rows == same.rows and fused.overall == same.overall
    with pytest.raises(ConfigError, match="fts5 retriever only"):
        run_fastbook(b, passages, ["bm25", "bm25:k1=1.2"], keywords=keywords)
    table = tmp_path / "table.csv"
    args = [
        "fastbook",
        "run",
        "--benchmark",
        str(bench),
        "--passages",
        str(_corpus(tmp_path, passages)),
        "--retriever",
        "bm25",
        "--retriever",
        "fts5",
        "--fusion",
        "rrf",
        "--rrf-k",
        "10",
        "--queries",
        "question",
        "--table-csv",
        str(table),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "retriever: bm25-lucene+fts5_rrf-k10" in out
    with_question = run_fastbook(b, passages, ["bm25", "fts5"], fusion={"method": "rrf", "k": 10}, k=10)
    rows = list(csv.DictReader(table.open()))
    assert [r["chapter"] for r in rows] == ["1", "2", "all"] and rows[-1]["questions"] == "5"
    assert float(rows[-1]["modified_mrr_at_10"]) == with_question.overall["modified_mrr_at_10"]
    assert float(rows[0]["modified_recall_at_10"]) == with_question.per_chapter[1]["modified_recall_at_10"]


def _corpus(tmp_path: Path, passages) -> Path:
    path = tmp_path / "corpus.jsonl"
    write_passages(passages, path)
    return path


def test_cli_run_without_output_folder_says_nothing_was_written(study, tmp_path, capsys, monkeypatch):
    docs, bench, queries = study
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "fastbook",
                "run",
                "--benchmark",
                str(bench),
                "--notebooks",
                str(docs),
                "--retriever",
                "fts5",
                "--queries",
                str(queries),
            ]
        )
        == 0
    )
    assert "results not written: give --output-folder" in capsys.readouterr().err


def test_duplicate_passage_ids_are_refused_in_one_line(study, tmp_path, capsys):
    """Issue 21: ``fastbook run`` accepted duplicate passage ids silently."""
    docs, bench, _ = study
    passages = chunk_documents([docs], PARAGRAPHS)
    twice = [*passages, passages[0]]
    with pytest.raises(DataFormatError, match=r"passage id '01_pets-0000' occurs twice"):
        run_fastbook(load_benchmark(bench), twice, "bm25")
    corpus = tmp_path / "dup.jsonl"
    corpus.write_text("".join(json.dumps(p.to_json()) + "\n" for p in twice))
    for command in ("run", "export-beir"):
        extra = ["--retriever", "bm25"] if command == "run" else ["-o", str(tmp_path / "beir")]
        argv = ["fastbook", command, "--benchmark", str(bench), "--passages", str(corpus), *extra]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "dup.jsonl, line 7: passage id '01_pets-0000' occurs twice" in err
    assert not (tmp_path / "beir").exists()


def test_export_beir_from_two_folders_with_the_same_file_names(study, tmp_path):
    """Two copies of the notebooks (same file names) give distinct ids, qualified by their folders."""
    docs, bench, _ = study
    import shutil

    shutil.copytree(docs, tmp_path / "copy")
    beir = tmp_path / "beir"
    argv = ["fastbook", "export-beir", "--benchmark", str(bench), "--notebooks", str(docs), str(tmp_path / "copy")]
    assert main([*argv, "--chunking", "paragraphs", "-o", str(beir)]) == 0
    ids = [json.loads(line)["_id"] for line in (beir / "corpus.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 2 * len(chunk_documents([docs], PARAGRAPHS))
    assert "notebooks/01_pets-0000" in ids and "copy/01_pets-0000" in ids


def test_scope_chapter_searches_one_fts5_table_with_a_chapter_filter(tmp_path):
    """Issue 21: ``--scope chapter`` built one index per chapter. The study keeps one FTS5 table
    ``(chapter, text)`` and adds ``AND chapter = ?``; its statistics come from the whole book."""
    import random
    import sqlite3

    rng = random.Random(7)
    own = {1: ["cat", "dog", "pet"], 2: ["gradient", "descent", "step"], 4: ["token", "text", "vocab"]}
    common = ["model", "data", "training", "layer", "python"]
    docs = tmp_path / "nb"
    docs.mkdir()
    for chapter, words in own.items():
        paragraphs = [" ".join(rng.choices(words * 3 + common + own[1], k=rng.randint(4, 25))) for _ in range(15)]
        _notebook(docs / f"{chapter:02d}_ch.ipynb", [_cell("markdown", "\n\n".join(paragraphs))])
    questions = []
    keywords: dict[tuple[int, int], str] = {}
    for chapter, words in own.items():
        for n in range(1, 5):
            keywords[(chapter, n)] = ", ".join(rng.sample(words + common + own[1], 3))
            questions.append(
                {
                    "chapter": chapter,
                    "question_number": n,
                    "question_text": "q",
                    "gold_standard_answer": "",
                    "answer_context": [_component("a", [words[0]])],
                    "question_context": [],
                }
            )
    bench = parse_benchmark({"questions": questions})
    passages = chunk_documents([docs], PARAGRAPHS)
    by_qid = {q.qid: keywords[(q.chapter, q.question_number)] for q in bench.questions}
    report = run_fastbook(bench, passages, "fts5", keywords=by_qid, scope="chapter", k=10)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE book USING fts5(chapter, text)")
    con.executemany("INSERT INTO book(chapter, text) VALUES (?, ?)", [(p.chapter, p.text) for p in passages])
    ids = [p.id for p in passages]
    for row in report.rows:
        terms = [w.strip(",") for w in keywords[(row["chapter"], row["question_number"])].replace('"', "").split()]
        expression = " OR ".join(f'"{w}"' for w in terms if w)
        direct = con.execute(
            "SELECT rowid FROM book WHERE book MATCH ? AND chapter = ? ORDER BY rank LIMIT 10",
            (expression, row["chapter"]),
        ).fetchall()
        assert row["retrieved"].split() == [ids[r - 1] for (r,) in direct]


@pytest.mark.parametrize("method", [["--chunk-size", "100"], ["--chunking", "fastbook-paragraphs-b"]])
def test_fastbook_run_takes_a_study_point(study, capsys, method):
    docs, bench, _ = study
    args = ["fastbook", "run", "--benchmark", str(bench), "--notebooks", str(docs), "--retriever", "bm25"]
    assert main([*args, *method]) == 0
    options = (
        ChunkingSettings(method="fastbook-reference", chunk_size=100).options()
        if "--chunk-size" in method
        else ChunkingSettings(method=method[1]).options()
    )
    assert f"{len(chunk_documents([docs], options))} passages from" in capsys.readouterr().err
