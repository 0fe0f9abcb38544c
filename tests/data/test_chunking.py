"""Chunkers lose nothing (issue 21): for every method, every non-whitespace character of a document is in
some passage, passages come in document order, and passage ids are unique across all inputs.

``paragraphs`` without headers drops exactly the Markdown header lines (``#`` … ``######`` then a space or
the line's end, outside fenced code) and keeps everything else; the generator below knows which lines it
made as headers, so the expectation does not reuse the code under test."""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedscope.cli.main import main
from embedscope.data.documents import chunk_documents, chunk_paragraphs, read_passages
from embedscope.errors import DataFormatError
from embedscope.settings.run import ChunkingSettings

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFXYZ0123456789.,;:!?()'\"-_*`é", min_size=1, max_size=12)
WORDS = st.lists(WORD, min_size=1, max_size=12).map(" ".join)
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def markdown(draw) -> tuple[str, str]:
    """A Markdown-like document and what ``--no-headers`` keeps of it (its non-header lines)."""
    lines: list[tuple[str, bool]] = []  # (line, is a header)
    for kind in draw(st.lists(st.sampled_from(["header", "body", "blank", "tag", "fence"]), min_size=1, max_size=25)):
        if kind == "header":
            lines.append((" " * draw(st.integers(0, 3)) + "#" * draw(st.integers(1, 6)) + " " + draw(WORDS), True))
        elif kind == "body":
            lines.append((draw(WORDS).lstrip("#"), False))
        elif kind == "blank":
            lines.append((draw(st.sampled_from(["", " ", "\t"])), False))
        elif kind == "tag":  # not a header: no space after the hashes, or seven of them
            lines.append((draw(st.sampled_from(["#tag", "####### seven", "#!/bin/sh"])), False))
        else:  # a fenced code block whose '# comment' lines are code, not headers
            lines += [("```python", False), ("# a comment " + draw(WORDS), False), ("x = 1", False), ("```", False)]
    text = "\n".join(line for line, _ in lines)
    kept = "\n".join(line for line, header in lines if not header)
    return text, kept


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _assert_covers_in_order(document: str, passages: list[str]) -> None:
    """The passages (whitespace removed) can be placed on the document (whitespace removed) in their
    order, each starting at or after the previous one's start and no later than the end of what is
    covered so far, so that together they cover every character (a search over all placements: text that
    repeats can place a passage in several spots)."""
    doc = _squash(document)
    pieces = [_squash(p) for p in passages]

    @cache
    def fits(i: int, start: int, covered: int) -> bool:
        if i == len(pieces):
            return covered == len(doc)
        at = doc.find(pieces[i], start)
        while 0 <= at <= covered:
            if fits(i + 1, at, max(covered, at + len(pieces[i]))):
                return True
            at = doc.find(pieces[i], at + 1)
        return False

    assert fits(0, 0, 0), f"the passages do not cover the document in order: {passages!r}"


@pytest.mark.slow
@FAST
@given(markdown(), st.integers(1, 4))
def test_paragraphs_keep_every_character_in_order(doc, n):
    text, _ = doc
    assert _squash("".join(chunk_paragraphs(text, n))) == _squash(text)


@pytest.mark.slow
@FAST
@given(markdown(), st.integers(1, 4))
def test_paragraphs_without_headers_drop_exactly_the_header_lines(doc, n):
    text, kept = doc
    assert _squash("".join(chunk_paragraphs(text, n, keep_headers=False))) == _squash(kept)


def test_the_line_under_a_header_is_kept():
    """The issue's case: the first body line under a header was dropped with the header."""
    text = "## Header\nBody text directly under the header.\n\nSecond paragraph."
    assert chunk_paragraphs(text, keep_headers=False) == ["Body text directly under the header.", "Second paragraph."]


def test_a_notebook_without_blank_lines_keeps_its_chapter(tmp_path):
    """Cells are joined by one newline: a chapter whose first line is its title was one 'header paragraph'."""
    cells = [{"cell_type": "markdown", "source": "# Chapter 4\nIntro line."}, {"cell_type": "code", "source": "x = 1"}]
    (tmp_path / "04_ch.ipynb").write_text(json.dumps({"cells": cells}))
    passages = chunk_documents([tmp_path], ChunkingSettings(method="paragraphs", keep_headers=False).options())
    assert [p.text for p in passages] == ["Intro line.\nx = 1"]


@pytest.mark.slow
@SLOW
@given(markdown(), st.integers(12, 60), st.integers(0, 10))
def test_token_windows_cover_the_document_in_order(doc, size, overlap):
    text, _ = doc
    passages = ChunkingSettings(method="tokens", chunk_size=size, overlap=min(overlap, size - 1)).options().split(text)
    _assert_covers_in_order(text, passages)


@pytest.mark.slow
@SLOW
@given(st.lists(markdown(), min_size=1, max_size=12))
def test_fastbook_reference_covers_the_document_in_order(docs):
    text = "\n\n".join(t for t, _ in docs) * 3  # long enough for several 500-token windows
    _assert_covers_in_order(text, ChunkingSettings(method="fastbook-reference").options().split(text))


NAMES = st.sampled_from(["03_doc", "03_doc", "04_x", "a", "a-0000", "b.c"])


@pytest.mark.slow
@FAST
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "a", "b", "a/b"]), NAMES, st.sampled_from([".md", ".txt"]), markdown()),
        min_size=1,
        max_size=6,
    )
)
def test_ids_are_unique_across_inputs_and_passages_follow_their_documents(tmp_path_factory, files):
    root = tmp_path_factory.mktemp("docs")
    written = {}
    for folder, name, suffix, (text, _) in files:
        path = root / folder / f"{name}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written[path] = text
    inputs = sorted({str(p.parent) for p in written})
    passages = chunk_documents(inputs, ChunkingSettings(method="paragraphs", stop_at=None).options())
    ids = [p.id for p in passages]
    assert len(ids) == len(set(ids))
    groups: dict[str, list] = {}  # passages by document name (the id without its number), in order
    for p in passages:
        name, number = p.id.rsplit("-", 1)
        assert name not in groups or name == list(groups)[-1]  # a document's passages are contiguous
        groups.setdefault(name, []).append((int(number), p.text))
    for rows in groups.values():
        assert [n for n, _ in rows] == list(range(len(rows)))
    got = sorted(_squash("".join(t for _, t in rows)) for rows in groups.values())
    assert got == sorted(_squash(t) for t in written.values() if _squash(t))


@pytest.mark.slow
def test_chunk_two_folders_with_the_same_file_name(tmp_path, capsys):
    """The issue's case: ``chunk chx/a chx/b`` wrote two passages ``03_doc-0000`` 'from 1 documents'."""
    for folder, text in (("a", "First document."), ("b", "Second document.")):
        (tmp_path / "chx" / folder).mkdir(parents=True)
        (tmp_path / "chx" / folder / "03_doc.md").write_text(text)
    out = tmp_path / "out.jsonl"
    assert main(["chunk", str(tmp_path / "chx" / "a"), str(tmp_path / "chx" / "b"), "-o", str(out)]) == 0
    assert "wrote 2 passages from 2 documents" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["_id"], r["source"], r["chapter"]) for r in rows] == [
        ("a/03_doc-0000", "a/03_doc.md", 3),
        ("b/03_doc-0000", "b/03_doc.md", 3),
    ]


def test_a_corpus_with_a_repeated_id_is_refused(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": i, "text": f"t {n}"}) + "\n" for n, i in enumerate("aba")))
    with pytest.raises(
        DataFormatError, match=r"corpus\.jsonl, line 3: passage id 'a' occurs twice \(first at line 1\)"
    ):
        read_passages(path)


@st.composite
def sectioned_markdown(draw) -> tuple[str, str]:
    """A Markdown-like document for the paragraph strategies and its non-header lines. Header titles start
    with 'H', which no body line holds (``WORD`` has no 'H'), so a chunk's header line is recognisable."""
    lines: list[tuple[str, bool]] = []
    kinds = ["header", "body", "blank", "tag", "fence", "html"]
    for i, kind in enumerate(draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=25))):
        if kind == "header":
            lines.append(
                (" " * draw(st.integers(0, 3)) + "#" * draw(st.integers(1, 6)) + f" H{i} " + draw(WORDS), True)
            )
        elif kind == "body":
            lines.append((draw(WORDS).lstrip("#"), False))
        elif kind == "blank":
            lines.append((draw(st.sampled_from(["", " ", "\t"])), False))
        elif kind == "tag":
            lines.append((draw(st.sampled_from(["#tag", "####### seven", "#!/bin/sh"])), False))
        elif kind == "html":
            lines.append(
                (draw(st.sampled_from(['<img src="a.png" width="9">', "</div>", "<br/>"])) + draw(WORDS), False)
            )
        else:
            lines += [("```python", False), ("# a comment " + draw(WORDS), False), ("x = 1", False), ("```", False)]
    return "\n".join(line for line, _ in lines), "\n".join(line for line, header in lines if not header)


def _strategy_view(method: str, text: str) -> str:
    """What a strategy keeps of text, written from the method note: E and F drop HTML tags (the three the
    generator makes), F also ASCII punctuation."""
    if method[-1] in "ef":
        for tag in ('<img src="a.png" width="9">', "</div>", "<br/>"):
            text = text.replace(tag, "")
    if method[-1] == "f":
        text = "".join(ch for ch in text if ch not in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    return text


@pytest.mark.slow
@FAST
@pytest.mark.parametrize("method", [f"fastbook-paragraphs-{v}" for v in "abcdef"])
@given(doc=sectioned_markdown())
def test_paragraph_strategies_keep_every_character_in_order(method, doc):
    """Without each chunk's header line, the chunks are the document's non-header lines, in order; with
    headers (a, b, e, f) every chunk under a header starts with it, and c, d have none."""
    text, kept = doc
    chunks = ChunkingSettings(method=method, stop_at=None).options().split(text)
    bodies = []
    for chunk in chunks:
        first, _, rest = chunk.partition("\n")
        assert ("H" in first) == (method[-1] not in "cd" and "H" in chunk), chunk
        bodies.append(rest if "H" in first else chunk)
    assert _squash("".join(bodies)) == _squash(_strategy_view(method, kept))
    per_chunk = 1 if method[-1] in "ac" else 3
    if method[-1] != "f":  # f can blank a line ('```' loses its punctuation), splitting a paragraph in two
        assert all(len([p for p in re.split(r"\n\s*\n", b) if p.strip()]) <= per_chunk for b in bodies)


@pytest.mark.slow
@SLOW
@pytest.mark.parametrize("size", [100, 300, 2000])
@given(docs=st.lists(markdown(), min_size=1, max_size=12))
def test_fastbook_reference_at_other_sizes_covers_the_document_in_order(size, docs):
    text = "\n\n".join(t for t, _ in docs) * 3
    _assert_covers_in_order(text, ChunkingSettings(method="fastbook-reference", chunk_size=size).options().split(text))


@pytest.mark.slow
@FAST
@pytest.mark.parametrize("method", ["paragraphs", "fastbook-paragraphs-a", "fastbook-paragraphs-d"])
@given(
    files=st.lists(
        st.tuples(st.sampled_from(["", "a", "b", "a/b"]), NAMES, st.sampled_from([".md", ".txt"]), markdown()),
        min_size=1,
        max_size=6,
    )
)
def test_ids_are_unique_for_every_paragraph_method(tmp_path_factory, method, files):
    root = tmp_path_factory.mktemp("docs")
    for folder, name, suffix, (text, _) in files:
        path = root / folder / f"{name}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    passages = chunk_documents(
        sorted({str(p.parent) for p in root.rglob("*.*")}), ChunkingSettings(method=method, stop_at=None).options()
    )
    ids = [p.id for p in passages]
    assert len(ids) == len(set(ids))
