"""Weak messages of issue 21 for ``report`` and ``tasks``: each is one line saying what is expected."""

from __future__ import annotations

import json

import pytest

from embedscope.cli.main import main


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("name,text", [("pairs.csv", "a,b\n1,2\n"), ("other.json", json.dumps({"x": 1}))])
def test_report_of_a_file_that_is_no_result_says_what_report_reads(tmp_path, capsys, name, text):
    path = tmp_path / name
    path.write_text(text)
    err = _error(capsys, ["report", str(path)])
    assert f"{path}: not an MTEB task result" in err and "report reads results folders" in err


def test_tasks_of_an_unknown_type_lists_the_types(capsys):
    err = _error(capsys, ["tasks", "--type", "Foo"])
    assert "Unknown task type 'Foo'" in err and "PairClassification" in err and "Retrieval" in err


def test_tasks_type_by_alias(capsys):
    assert main(["tasks", "--type", "pair_classification", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["type"] for r in rows} == {"PairClassification"}
