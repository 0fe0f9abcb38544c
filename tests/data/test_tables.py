"""The one table reader (embedscope.data.tables): every loader shares its file types, locations and split files."""

from __future__ import annotations

import gzip
import json

import pytest

from embedscope.data import hf, hub_files
from embedscope.data.tables import read_rows, table_suffixes
from embedscope.data.tabular import split_rows
from embedscope.errors import DataFormatError
from embedscope.tasks.classification import load_labelled_file
from embedscope.tasks.registry import looks_like_path


def test_labelled_task_files_read_every_table_type(tmp_path):
    """Classification files used to accept fewer types than retrieval tables (no .jsonl.gz, no UTF-8 BOM)."""
    with gzip.open(tmp_path / "train.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"text": "a", "label": 1}) + "\n")
    (tmp_path / "test.csv").write_text("\ufefftext,label\nb,2\n", encoding="utf-8")
    assert load_labelled_file(tmp_path, "train").labels == (1,)
    assert load_labelled_file(tmp_path, "test").texts == ("b",)


def test_two_files_for_one_split_is_an_error(tmp_path):
    (tmp_path / "test.csv").write_text("text,label\na,1\n")
    (tmp_path / "test.jsonl").write_text('{"text": "a", "label": 1}\n')
    with pytest.raises(DataFormatError, match=r"both test.jsonl and test.csv; keep only one test file"):
        split_rows(tmp_path, "test", "split")


def test_locations_name_file_and_line_whatever_the_reader(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\na\t1\nb\t2\n")
    assert [where for where, _ in read_rows(path)] == [f"{path}, line 2", f"{path}, line 3"]
    with pytest.raises(DataFormatError, match=r"t.tsv, line 3: field 'label' \(the label\) is empty"):
        path.write_text("text\tlabel\na\t1\nb\t\n")
        load_labelled_file(path)


def test_one_suffix_list():
    assert not hasattr(hf, "DATA_SUFFIXES") and not hasattr(hub_files, "DATA_SUFFIXES")
    assert all(looks_like_path(f"data{suffix}") for suffix in table_suffixes())
