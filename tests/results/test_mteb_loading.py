"""mteb itself reads every result file embedscope writes: per file and as a whole results folder."""

from __future__ import annotations

import importlib.util
import json
import warnings

import pytest

import embedscope
from embedscope.retrieval.late_interaction import LateInteraction
from embedscope.retrieval.pipeline import Pipeline, RerankStep
from embedscope.testing.fakes import HashEncoder, OverlapReranker, WordTokenEncoder
from embedscope.testing.tiny import tiny_retrieval_task, tiny_tasks_of_every_type
from support.mteb_results import mteb_file_scores, mteb_folder_scores

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mteb") is None, reason="mteb is not installed")


@pytest.fixture(scope="module")
def every_type(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = embedscope.evaluate(
            HashEncoder(),
            tiny_tasks_of_every_type(),
            output_folder=out,
            cache=False,
            show_progress=False,
            save_predictions=True,
        )
    return out, report


@pytest.mark.slow
def test_every_task_type_loads_with_task_result_from_disk(every_type):
    out, report = every_type
    scores = mteb_file_scores(out)
    assert len(scores) == len(report.outcomes) == 9
    for outcome in report.outcomes:
        assert scores[outcome.path] == pytest.approx(outcome.result.main_score(), abs=1e-12)


@pytest.mark.slow
def test_evaluation_phases_follow_mteb_phase_timing(every_type):
    import mteb

    out, report = every_type
    for outcome in report.outcomes:
        phases = mteb.TaskResult.from_disk(outcome.path).evaluation_phases
        assert [p["name"] for p in phases] == list(outcome.timings)
        assert all(p["split"] == "test" and p["subset"] == "default" and p["end"] >= p["start"] for p in phases)
        assert [p["start"] for p in phases[1:]] == [p["end"] for p in phases[:-1]]


@pytest.mark.slow
def test_mteb_loads_the_whole_results_folder(every_type):
    out, report = every_type
    assert (out / "fake__hash-encoder" / "dim16" / "predictions" / "TinyRetrieval_predictions.json").is_file()
    loaded = mteb_folder_scores(out)
    expected = {("fake/hash-encoder", "dim16", o.task.name): o.result.main_score() for o in report.outcomes}
    assert loaded == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_extra_fields_stay_in_the_file(every_type):
    out, report = every_type
    data = json.loads(report.outcomes[0].path.read_text())
    assert data["task_type"] == "Retrieval" and data["protocol"] == "mteb-2.26" and "embedscope_version" in data


def test_two_stage_stage_files_load_with_mteb(tmp_path):
    pipeline = Pipeline([LateInteraction(WordTokenEncoder())], rerankers=[RerankStep(OverlapReranker())], name="p")
    report = embedscope.evaluate(
        pipeline, [tiny_retrieval_task()], output_folder=tmp_path / "out", top_k=2, cache=False, show_progress=False
    )
    scores = mteb_file_scores(tmp_path / "out")
    folder = report.outcomes[0].path.parent
    assert set(scores) == {
        folder / "TinyRetrieval.json",
        folder / "stage1" / "TinyRetrieval.json",
        folder / "stage2" / "TinyRetrieval.json",
    }
    assert mteb_folder_scores(tmp_path / "out") == {
        ("p", pipeline.revision, "TinyRetrieval"): scores[folder / "TinyRetrieval.json"]
    }
