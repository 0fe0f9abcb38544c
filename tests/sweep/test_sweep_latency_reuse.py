"""``latency_sample`` on a result stored without latency (issue 31): the stored result is not reused silently
without the figure asked for; it is run again (and says so), or refused in one line when the overwrite strategy keeps
stored results."""

from __future__ import annotations

import json
import logging

import pytest

from embedscope.errors import ConfigError
from embedscope.evaluation.runner import evaluate
from embedscope.sweep.grid import SweepGrid, run_sweep
from embedscope.testing.fakes import KeywordEncoder

from .test_sweep import WORDS, base, write_beir


def _run(encoder, beir, tmp_path, **more):
    return evaluate(encoder, [str(beir)], output_folder=str(tmp_path / "out"), cache=False, show_progress=False, **more)


def test_latency_sample_on_a_stored_result_measures_it_again(tmp_path, caplog):
    beir = write_beir(tmp_path / "words")
    encoder = KeywordEncoder(WORDS, name="fake/keywords")
    first = _run(encoder, beir, tmp_path)
    assert "query_latency" not in json.loads(first.outcomes[0].path.read_text())
    with caplog.at_level(logging.WARNING, logger="embedscope"):
        second = _run(encoder, beir, tmp_path, latency_sample=5)
    (outcome,) = second.outcomes
    assert not outcome.reused and "no latency measurement: running it again" in caplog.text
    stored = json.loads(outcome.path.read_text())
    assert len(stored["query_latency"]["test"]["total_ms"]) == 5
    before = json.loads(first.outcomes[0].path.read_text())["scores"]["test"][0]["main_score"]
    assert stored["scores"]["test"][0]["main_score"] == before  # latency is not a setting: the same score
    third = _run(encoder, beir, tmp_path, latency_sample=5)
    assert third.outcomes[0].reused  # a result that holds its latency is reused


def test_latency_sample_with_overwrite_never_is_one_line(tmp_path):
    beir = write_beir(tmp_path / "words")
    encoder = KeywordEncoder(WORDS, name="fake/keywords")
    _run(encoder, beir, tmp_path)
    with pytest.raises(ConfigError) as refused:
        _run(encoder, beir, tmp_path, latency_sample=5, overwrite="never")
    assert "\n" not in str(refused.value) and "latency_sample" in str(refused.value)


@pytest.mark.slow
def test_a_resumed_sweep_point_gets_its_latency(tmp_path):
    beir = write_beir(tmp_path / "words")
    encoder = KeywordEncoder(WORDS, name="fake/keywords")
    run_sweep(SweepGrid([base(beir, tmp_path, model=encoder)], [("truncate_dim", [None, 4])]), log=None)
    timed = run_sweep(
        SweepGrid([base(beir, tmp_path, model=encoder, latency_sample=4)], [("truncate_dim", [None, 4])]), log=None
    )
    for outcome in timed:
        assert not outcome.reused
        assert len(json.loads(outcome.paths["words"].read_text())["query_latency"]["test"]["total_ms"]) == 4
