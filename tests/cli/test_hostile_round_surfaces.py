"""The hostile round (tests/cli/test_hostile_round.py) over the surfaces added last (issue 31): filter fields,
QA folders (two question files, per-stage keyword files), index specs, compare on revision folders with
experiments, and exports (an edited manifest, a killed export's temporary folder). Each case runs the CLI in its own
sandbox (HOME, TMPDIR, cache) and must end in exit 0 or a one-line error with exit 2 naming its subject, writing
nothing outside the named folders; each replays a case of the issue."""

from __future__ import annotations

import contextlib
import io
import json
import os
import traceback
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.testing.tiny import write_tiny_beir
from tests.cli.test_hostile_round import Argv, Case, _names_its_subject, _results
from tests.support.qa import write_qa_folder

pytestmark = pytest.mark.slow

HUGE = "99999999999999999999999"


def _beir_with(root: Path, field: str, values: list) -> str:
    """The tiny BEIR task with metadata ``field`` on every document and query (values cycled)."""
    import hashlib

    folder = write_tiny_beir(root / "data" / f"beir-{hashlib.sha256(repr((field, values)).encode()).hexdigest()[:8]}")
    for name in ("corpus.jsonl", "queries.jsonl"):
        rows = [json.loads(line) for line in (folder / name).read_text().splitlines()]
        for i, row in enumerate(rows):
            row[field] = values[i % len(values)]
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def _run(root: Path, *args: str) -> list[str]:
    return ["run", *args, "--output-folder", str(root / "out"), "--no-progress"]


def _filter_cases() -> list[Case]:
    cases = []
    for field in ("group", "order", "select", "a b", 'we"ird', "text", "rowid"):
        for model in ("fts5", "bm25"):

            def argv(root: Path, field: str = field, model: str = model) -> list[str]:
                data = _beir_with(root, field, ["x", "y"])
                return _run(root, "--model", model, "--tasks", data, "--filter-field", field, "--no-cache")

            # "text" is a row's text in BEIR, never metadata: refused naming it
            cases.append(Case(f"filter field {field!r} with {model}", argv, field, refused=field == "text"))
    for label, values in {"int and str": [1, "1"], "bool and int": [True, 2], "float and str": [1.5, "a"]}.items():

        def mixed(root: Path, values: list = values) -> list[str]:
            data = _beir_with(root, "chapter", values)
            return _run(root, "--model", "fts5", "--tasks", data, "--filter-field", "chapter", "--no-cache")

        cases.append(Case(f"filter field mixing {label}", mixed, "chapter"))
    return cases


def _qa(root: Path, *, jsonl: bool = False, keywords: str | bytes | None = None, name: str = "qa") -> str:
    folder = root / "data" / name
    if not folder.exists():
        write_qa_folder(folder, n_docs=2, paragraphs=6, n_questions=6)
        if jsonl:
            (folder / "questions.jsonl").write_text(json.dumps({"_id": "q", "text": "cat", "contexts": ["cat"]}) + "\n")
        if keywords == "GOOD":  # every question but the last, one of them with no keywords
            questions = json.loads((folder / "questions.json").read_text())["questions"]
            rows = [f'{q["chapter"]},{q["question_number"]},q,"""cat, {i}"""\n' for i, q in enumerate(questions[:-1])]
            keywords = HEADER + "".join(rows) + f"{questions[-1]['chapter']},{questions[-1]['question_number']},q,\n"
        if keywords is not None:
            raw = keywords if isinstance(keywords, bytes) else keywords.encode("utf-8")
            (folder / "fts_keywords.csv").write_bytes(raw)
    return str(folder)


HEADER = "chapter,question_number,question_text,keywords\n"


def _qa_cases() -> list[Case]:
    def qa(**kwargs: object) -> Argv:
        return lambda root: _run(root, "--model", "fts5", "--tasks", _qa(root, **kwargs), "--no-cache")  # type: ignore[arg-type]

    return [
        Case("QA folder with questions.json and questions.jsonl", qa(jsonl=True), "questions.jsonl"),
        Case("QA keywords for a question it has not", qa(keywords=HEADER + "9,9,q,cat\n"), "fts_keywords.csv"),
        Case("QA keywords without the header", qa(keywords="1,1,q,cat\n"), "fts_keywords.csv"),
        Case("QA keywords chapter not a number", qa(keywords=HEADER + "one,1,q,cat\n"), "fts_keywords.csv"),
        Case("QA keywords not UTF-8", qa(keywords=HEADER.encode() + b"1,1,q,caf\xe9\n"), "fts_keywords.csv"),
        Case("QA keywords good", qa(keywords="GOOD"), "fts5", refused=False),
        Case(
            "QA keywords with fts5 fused with bm25",
            lambda root: _run(
                root, "--retriever", "fts5", "--retriever", "bm25", "--tasks", _qa(root, keywords="GOOD"), "--no-cache"
            ),
            "fts5",
            refused=False,
        ),
        Case(
            "QA keywords with questions.jsonl only",
            lambda root: _run(root, "--model", "fts5", "--tasks", _jsonl_qa(root), "--no-cache"),
            "fts_keywords.csv",
        ),
    ]


def _jsonl_qa(root: Path) -> str:
    folder = root / "data" / "qa-jsonl"
    (folder / "documents").mkdir(parents=True, exist_ok=True)
    (folder / "documents" / "01_a.md").write_text("cat dog fish\n")
    (folder / "questions.jsonl").write_text(json.dumps({"_id": "q", "text": "cat", "contexts": ["cat dog"]}) + "\n")
    (folder / "fts_keywords.csv").write_text(HEADER + "1,1,q,cat\n")
    return str(folder)


def _index_cases() -> list[Case]:
    specs = {
        f"hnsw:ef_search={HUGE}": "ef_search",
        f"hnsw:M={HUGE}": "M",
        f"ivfpq:nlist={HUGE}": "nlist",
        f"ivfpq:seed=-{HUGE}": "seed",
        f"ivfpq:nprobe={HUGE}": "nprobe",
        "hnsw:ef_search=1e400": "ef_search",
    }
    return [
        Case(
            f"index {spec}",
            lambda root, spec=spec: ["run", "--model", "static-64", "--index", spec, "--print-settings"],
            key,
        )
        for spec, key in specs.items()
    ]


def _with_experiment(root: Path, name: str) -> str:
    """A result folder as ``_results`` makes it, plus a run with other settings (its experiments folder)."""
    from embedscope.evaluation.runner import evaluate
    from embedscope.testing.fakes import KeywordEncoder
    from embedscope.testing.tiny import tiny_retrieval_task

    folder = Path(_results(root, name))
    evaluate(
        KeywordEncoder(["cat", "dog"], name=f"toy/{name}"),
        [tiny_retrieval_task()],
        output_folder=folder,
        cache=False,
        show_progress=False,
        top_k=5,
    )
    (revision,) = [p.parent for p in folder.rglob("model_meta.json") if "experiments" not in p.parts]
    return str(revision)


def _compare_cases() -> list[Case]:
    return [
        Case(
            "compare revision folders with experiments",
            lambda root: ["compare", _with_experiment(root, "a"), _with_experiment(root, "b"), "--rounds", "50"],
            "compare",
            refused=False,
        ),
        Case(
            "compare model folders with experiments",
            lambda root: ["compare", str(Path(_with_experiment(root, "a")).parent), _results(root, "b")],
            "compare",
            refused=False,
        ),
        Case(
            "compare a folder of experiments only",
            lambda root: ["compare", str(Path(_with_experiment(root, "a")) / "experiments"), _results(root, "b")],
            "experiments",
        ),
    ]


def _exported(root: Path, edit: str) -> list[str]:
    """A tiny model exported for ``--backend onnx`` into the sandbox's cache, its manifest then edited."""
    from support.tiny_models import build_tiny_sentence_transformer

    model = root / "in" / "st"
    if not model.exists():
        build_tiny_sentence_transformer(model)
    data = str(write_tiny_beir(root / "data" / "beir"))
    argv = _run(root, "--model", str(model), "--backend", "onnx", "--tasks", data, "--no-cache")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--overwrite"]) == 0
    exports = root / "cache" / "exports"
    (folder,) = [p for p in exports.iterdir() if not p.name.startswith(".")]
    manifest = json.loads((folder / "export.json").read_text())
    if edit == "pooling":
        manifest["pooling"] = "cls"
    elif edit == "prompts":
        manifest["prompts"] = {"query": "query: ", "document": "passage: "}
    elif edit == "normalize":
        del manifest["normalize"]
    elif edit == "not json":
        manifest = None
    (folder / "export.json").write_text("{" if manifest is None else json.dumps(manifest))
    if edit == "killed":  # a temporary folder of this host's process 2**22 + 1, above Linux's largest pid: dead
        from embedscope.models.exports import _host

        (exports / f".k.{_host()}~{2**22 + 1}.abc.tmp").mkdir()
    return [*argv, "--overwrite"]


def _export_cases() -> list[Case]:
    return [
        Case(f"export manifest {edit}", lambda root, e=edit: _exported(root, e), "export", refused=False)
        for edit in ("pooling", "prompts", "normalize", "not json", "killed")
    ]


CASES = _filter_cases() + _qa_cases() + _index_cases() + _compare_cases() + _export_cases()
argv_of: dict[str, list[str]] = {}


def test_the_round_names_each_case_once():
    assert len(CASES) >= 35 and len({c.name for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[int | str, str]]:
    """Each case's exit code (or the traceback) and stderr, in a sandbox of its own (as the older round)."""
    results: dict[str, tuple[int | str, str]] = {}
    for n, case in enumerate(CASES):
        root = tmp_path_factory.mktemp(f"surface{n}")
        for sub in ("cwd", "home", "tmp", "cache"):
            (root / sub).mkdir()
        saved = {k: os.environ.get(k) for k in ("HOME", "TMPDIR", "EMBEDSCOPE_CACHE")}
        os.environ.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), EMBEDSCOPE_CACHE=str(root / "cache"))
        here = os.getcwd()
        os.chdir(root / "cwd")
        err, out = io.StringIO(), io.StringIO()
        try:
            argv = argv_of[case.name] = case.argv(root)
            before = set(root.rglob("*"))
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    code: int | str = main(argv)
                except SystemExit as e:
                    code = int(e.code or 0)
                except BaseException:
                    code = "traceback: " + traceback.format_exc(limit=3)
            written = set(root.rglob("*")) - before
            named = ("out", "cache", "in", "res", "data")
            outside = sorted(
                str(p.relative_to(root)) for p in written if not any(p.is_relative_to(root / ok) for ok in named)
            )
            if case.name.endswith("killed") and list((root / "cache" / "exports").glob(".*.tmp")):
                outside.append("cache/exports: a killed export's temporary folder was left")
            results[case.name] = (code, err.getvalue() + "".join(f"\nWROTE {o}" for o in outside))
        finally:
            os.chdir(here)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return results


def test_no_traceback_no_write_outside_and_refusals_are_one_line(outcomes):
    problems = []
    for case in CASES:
        code, err = outcomes[case.name]
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("WARNING")]
        if isinstance(code, str) or "Traceback" in err:
            problems.append(f"{case.name}: {code if isinstance(code, str) else err}")
        elif "\nWROTE " in err:
            problems.append(f"{case.name}: wrote outside the named folders: {err}")
        elif case.refused and code != 2:
            problems.append(f"{case.name}: accepted (exit {code})")
        elif not case.refused and code != 0:
            problems.append(f"{case.name}: refused (exit {code}): {err[:300]!r}")
        elif code == 2 and (len(lines) != 1 or "error:" not in lines[0]):
            problems.append(f"{case.name}: {len(lines)} lines: {err[:300]!r}")
        elif code == 2 and not _names_its_subject(lines[0], case, argv_of[case.name]):
            problems.append(f"{case.name}: does not name its subject: {lines[0][:200]}")
    print(f"surfaces round: {len(CASES)} cases, {len(problems)} failed")
    assert not problems, f"{len(problems)} of {len(CASES)} cases failed:\n" + "\n".join(problems)
