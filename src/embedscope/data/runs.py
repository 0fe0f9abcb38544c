"""Run and qrels files: TREC formats, BEIR / EvalScope qrels tables, and JSON ``{qid: {docid: value}}``.

The format is detected from the content, not the file name. Errors name the file and line.
TREC runs are read column by column (pyarrow) into a :class:`~embedscope.types.RankedRun`
(:func:`read_ranked_run`), without per-query dicts.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
>>> write_trec_run({"q1": {"d1": 0.5, "d2": 0.9}}, path)
>>> path.read_text().splitlines()[0]
'q1 Q0 d2 1 0.9 embedscope'
>>> read_run(path)
{'q1': {'d2': 0.9, 'd1': 0.5}}
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from embedscope.data.validate import add_judgment, as_id, as_relevance, pick
from embedscope.errors import DataFormatError
from embedscope.messages import clip, listing
from embedscope.types import KeyedRun, RankedRun

_QID_HEADERS = ("query-id", "query_id", "qid", "queryid")


def _text(path: Path, what: str) -> str:
    if not path.is_file():
        raise DataFormatError(f"{path}: no such {what} file")
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start}); save it as UTF-8") from None


_JSON_SHAPE = "one JSON object {query id: {doc id: value}}"


def _json_mapping(path: Path, text: str) -> dict | None:
    """``{qid: {doc: value}}`` when the file is one JSON document of that shape; None when it is not JSON
    (TREC / TSV) or is JSON lines. A JSON array is an error that says which shape is expected."""
    if text.lstrip().startswith("["):
        _refuse_json_array(path, text)
        return None
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines[:2]):
            return None  # JSON lines
        raise DataFormatError(f"{path}, line {e.lineno}: malformed JSON ({e.msg} at column {e.colno})") from None
    if isinstance(data, dict) and any(k in data for k in ("query-id", "query_id", "qid")):
        return None  # a single JSON-lines row
    if not isinstance(data, dict):
        raise DataFormatError(f"{path}: JSON must map query ids to {{doc id: value}} objects")
    for qid, docs in data.items():
        if not isinstance(docs, dict):
            raise DataFormatError(
                f"{path}: query {qid!r} maps to a {type(docs).__name__}; JSON must map query ids "
                "to {doc id: value} objects"
            )
    return data


def _refuse_json_array(path: Path, text: str) -> None:
    """A DataFormatError when ``text`` is one JSON array; nothing when it is not JSON (a TREC line
    that happens to start with ``[``)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return
    raise DataFormatError(
        f"{path}: a JSON {type(data).__name__}, but a run or qrels file is {_JSON_SHAPE} (or TREC lines "
        "'qid Q0 docid rank score tag')"
    )


def _score(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise DataFormatError(f"{where}: score {value!r} is not a number")
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(f"{where}: score {clip(value)} is not a number") from None
    if math.isnan(score):
        raise DataFormatError(f"{where}: score is NaN; fix the scoring that produced it")
    if math.isinf(score):
        raise DataFormatError(
            f"{where}: score {clip(value) if isinstance(value, str) else score} is infinite (or too large for a "
            "64-bit float); scores must be finite numbers"
        )
    return score


def _json_run(path: Path, data: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    data = unwrap_predictions(path, data)
    return {
        str(q): {str(d): _score(s, f"{path}, query {clip(q)}, document {clip(d)}") for d, s in docs.items()}
        for q, docs in data.items()
    }


def _is_mapping_of_runs(value: Any) -> bool:
    """``{split: {qid: {doc: score}}}``: every value a mapping of mappings."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(v, dict) and all(isinstance(d, dict) for d in v.values()) for v in value.values())
    )


def unwrap_predictions(path: Path, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The run inside the ``save_predictions`` ``{hf_subset: {split: {qid: {doc: score}}}}`` file
    (when it holds one subset and one split), else ``data`` as it is (a plain ``{qid: {doc: score}}`` run)."""
    if not data or not all(_is_mapping_of_runs(splits) for splits in data.values()):
        return data
    runs = [(subset, split, run) for subset, splits in data.items() for split, run in splits.items()]
    if len(runs) != 1:
        raise DataFormatError(
            f"{path}: a predictions file with {len(runs)} runs "
            f"({listing(f'{a}/{b}' for a, b, _ in runs)}); save each as its own JSON run file"
        )
    return runs[0][2]


def json_run_or_none(path: Path) -> dict[str, dict[str, float]] | None:
    """The run when the file is one JSON document ``{qid: {docid: score}}``, else None (TREC)."""
    if not path.is_file():
        raise DataFormatError(f"{path}: no such run file")
    with _open(path) as f:
        head = f.read(4096).decode("utf-8-sig", errors="replace")
    if not head.lstrip().startswith(("{", "[")):
        return None
    data = _json_mapping(path, _text(path, "run"))
    return None if data is None else _json_run(path, data)


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A run from a TREC run file (``qid Q0 docid rank score tag``, whitespace-separated) or JSON
    ``{qid: {docid: score}}``. A document listed twice for one query is an error."""
    path = Path(path)
    data = json_run_or_none(path)
    return data if data is not None else read_trec_run(path).to_dict()


def read_ranked_run(path: str | Path) -> RankedRun:
    """:func:`read_run` in array form, without building per-query dicts for TREC files."""
    path = Path(path)
    data = json_run_or_none(path)
    return RankedRun.from_dict(data) if data is not None else read_trec_run(path)


# ---------------------------------------------------------------------------------------------
# TREC runs, columnar: blocks of whole lines parsed by pyarrow; a block pyarrow rejects is parsed
# line by line in Python, which either reads it (e.g. several spaces between fields) or names the line.

_BLOCK_BYTES = 16 << 20
_ARROW_THREADS = False  # a block is parsed on one thread: blocks are the unit of parallelism (parse ahead)
_TREC_COLUMNS = ("qid", "q0", "doc", "rank", "score", "tag")
_BOM = b"\xef\xbb\xbf"


def _open(path: Path) -> Any:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _feed_blocks(path: Any, add: Any, pool: Any) -> None:
    """Hand each block of ``path`` to ``add(offset, block, parsed)``, where ``parsed`` is the future of
    pyarrow's parse submitted to ``pool`` one block ahead of the block being added."""
    delimiter, pending = None, None
    for offset, block in _blocks(path):
        delimiter = delimiter or _delimiter(block)
        parsed = pool.submit(_arrow_block, block, delimiter)
        if pending is not None:
            add(*pending)
        pending = (offset, block, parsed)
    if pending is not None:
        add(*pending)


def _blocks(path: Path) -> Iterator[tuple[int, memoryview]]:
    """``(byte offset, block)``: the file in blocks of whole lines (the last may lack its newline).
    A block stays valid while the next one is read, not after (two buffers take turns; an
    uncompressed file is mapped instead of read, and the pages of a block are let go two blocks on)."""
    if not path.name.endswith(".gz"):
        yield from _mapped_blocks(path)
        return
    size = _BLOCK_BYTES
    buffer, spare = bytearray(size), bytearray(size)
    offset, filled = 0, 0
    with _open(path) as f:
        while True:
            if filled == len(buffer):  # a line longer than the buffer (a new one: views of the old may live on)
                buffer = buffer + bytes(len(buffer))
            read = f.readinto(memoryview(buffer)[filled:])
            end = filled + read
            cut = end if not read else buffer.rfind(b"\n", 0, end) + 1
            start = len(_BOM) if offset == 0 and buffer.startswith(_BOM) and cut >= len(_BOM) else 0
            if not cut:  # no whole line yet (or nothing left): read on into the same buffer
                if not read:
                    return
                filled = end
                continue
            if cut > start:
                yield offset + start, memoryview(buffer)[start:cut]
            offset += cut
            if not read:
                return
            if len(spare) < len(buffer):
                spare = bytearray(len(buffer))
            spare[: end - cut] = buffer[cut:end]
            buffer, spare = spare, buffer
            filled = end - cut


def _mapped_blocks(path: Path) -> Iterator[tuple[int, memoryview]]:
    """:func:`_blocks` of an uncompressed file, as views of a read-only mapping (no copy): released
    pages stay in the page cache, so a view read again after its release is still right."""
    import mmap

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_SEQUENTIAL)
    view = memoryview(mapped)
    offset = len(_BOM) if mapped[: len(_BOM)] == _BOM else 0
    done: list[tuple[int, int]] = []
    while offset < size:
        end = offset + _BLOCK_BYTES
        if end >= size:
            cut = size
        else:
            cut = mapped.rfind(b"\n", offset, end) + 1
            if cut <= offset:  # a line longer than a block: up to its end
                cut = mapped.find(b"\n", end) + 1 or size
        yield offset, view[offset:cut]
        done.append((offset, cut))
        if len(done) > 2 and hasattr(mmap, "MADV_DONTNEED"):  # out of this process's RSS
            first, last = done.pop(0)
            page = mmap.PAGESIZE
            start, stop = -(-first // page) * page, (last // page) * page
            if stop > start:
                mapped.madvise(mmap.MADV_DONTNEED, start, stop - start)
        offset = cut


class _LineCounter:
    """Line number of a byte offset of a file, counted forward on demand: only a block that is read
    line by line (or an error) needs it, so a well-formed file is never counted."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.line = path, 0, 1

    def line_at(self, offset: int) -> int:
        if offset < self.offset:
            self.offset, self.line = 0, 1
        with _open(self.path) as f:
            f.seek(self.offset)
            while self.offset < offset:
                chunk = f.read(min(_BLOCK_BYTES, offset - self.offset))
                if not chunk:
                    break
                self.line += chunk.count(b"\n")
                self.offset += len(chunk)
        return self.line


@dataclass
class _Columns:
    """The parsed lines of one block: ids as strings, scores as float64 pieces."""

    qid: pa.Array | pa.ChunkedArray
    doc: pa.Array | pa.ChunkedArray
    score: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.qid)


def _arrow_block(block: memoryview, delimiter: str) -> _Columns | None:
    """pyarrow's reading of a block of canonical lines (one delimiter between fields), or None."""
    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(block)),
            read_options=pacsv.ReadOptions(
                column_names=list(_TREC_COLUMNS), use_threads=_ARROW_THREADS, block_size=max(len(block), 1) + 1
            ),  # one chunk: nothing to combine
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, escape_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={"qid": pa.string(), "doc": pa.string(), "score": pa.float64()},
                include_columns=["qid", "doc", "score"],
                null_values=[],
                strings_can_be_null=False,
            ),
            memory_pool=pa.default_memory_pool(),
        )
    except pa.ArrowInvalid:
        return None
    score = [_values(chunk, np.float64) for chunk in table["score"].chunks]
    if not all(np.isfinite(piece).all() for piece in score):
        return None  # NaN or ±inf: the line-by-line reading names the line
    return _Columns(table["qid"], table["doc"], score)


def _python_block(path: Path, block: memoryview, first_line: int) -> _Columns:
    """A block read line by line; raises naming the first bad line."""
    try:
        text = str(block, "utf-8")
    except UnicodeDecodeError as e:
        bad_line = first_line + bytes(block[: e.start]).count(b"\n")
        raise DataFormatError(f"{path}, line {bad_line}: not valid UTF-8 ({e.reason}); save it as UTF-8") from None
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    for lineno, line in enumerate(text.split("\n"), start=first_line):
        parts = line.split()
        if not parts:
            continue
        where = f"{path}, line {lineno}"
        if len(parts) != 6:
            hint = (
                " (this looks like JSON lines; use one JSON object {qid: {docid: score}})"
                if parts[0].startswith("{")
                else ""
            )
            raise DataFormatError(f"{where}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}{hint}")
        qids.append(parts[0])
        docs.append(parts[2])
        scores.append(_score(parts[4], where))
    return _Columns(string_array(qids), string_array(docs), [np.array(scores, dtype=np.float64)])


def _delimiter(block: memoryview) -> str:
    first = next((ln for ln in bytes(block[:65536]).split(b"\n") if ln.strip()), b"")
    return "\t" if b"\t" in first and b" " not in first else " "


def _values(array: pa.Array, dtype: type) -> np.ndarray:
    """The values buffer of a fixed-width array as numpy, zero-copy (null slots hold arbitrary values).

    ``to_numpy`` would import pandas (a quarter of a second) through pyarrow's compatibility layer.
    """
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * np.dtype(dtype).itemsize
    )


def string_array(values: list[str]) -> pa.Array:
    """A pyarrow string array of ``values``, built from buffers: ``pa.array`` would import pandas (a
    sixth of a second) to check whether ``values`` is a pandas object.

    >>> string_array(["a", "", "é"]).to_pylist()
    ['a', '', 'é']
    """
    encoded = [v.encode("utf-8", errors="surrogateescape") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    kind = pa.string() if offsets[-1] < 2**31 else pa.large_string()
    if kind == pa.string():
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(kind, len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def _arrow_int64(values: np.ndarray) -> pa.Array:
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


class _LazyCompute:
    """``pyarrow.compute``, imported on first use (a twentieth of a second; ``score`` needs it only for
    odd files)."""

    def __getattr__(self, name: str) -> Any:
        import pyarrow.compute

        return getattr(pyarrow.compute, name)


pc = _LazyCompute()


class _Bytes:
    """The offsets of a string array and its bytes, read 8 at a time from any offset (zeros past the end)."""

    def __init__(self, column: pa.Array) -> None:
        n = len(column)
        wide = pa.types.is_large_string(column.type)
        _, offsets_buffer, data_buffer = column.buffers()
        self.offsets = np.frombuffer(
            offsets_buffer, dtype=np.int64 if wide else np.int32, count=n + 1, offset=column.offset * (8 if wide else 4)
        ).astype(np.int64)
        self.end = end = int(self.offsets[-1])
        padded = np.zeros(end + 16, dtype=np.uint8)  # small arrays only (query ids): a copy is cheap
        if end:
            padded[:end] = np.frombuffer(data_buffer, dtype=np.uint8, count=end)
        self.padded = padded
        self.words = np.ndarray((end + 9,), dtype="<u8", buffer=padded, strides=(1,))

    def word(self, at: np.ndarray, left: np.ndarray) -> np.ndarray:
        """The ``min(left, 8)`` bytes from each offset ``at``, little-endian."""
        return self.words[at] & _KEY_MASKS[np.clip(left, 0, 8)]


def _run_starts(column: pa.Array) -> np.ndarray:
    """Rows where ``column`` differs from the row before (always row 0), exactly: by :func:`id_keys`, and
    byte by byte where two neighbouring ids longer than 7 bytes have equal keys."""
    n = len(column)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    keys = id_keys(column)
    same = keys[1:] == keys[:-1]
    rows = np.flatnonzero(same & (keys[1:] >> 59 > 0))  # row r + 1 hashed like row r: compare the bytes
    if len(rows):
        b = _Bytes(column)
        starts, lengths = b.offsets[:-1], np.diff(b.offsets)
        rows = rows[lengths[rows + 1] == lengths[rows]]
        same[np.flatnonzero(same & (keys[1:] >> 59 > 0))] = False
        same[rows] = True
        huge = rows[lengths[rows] > _VECTOR_BYTES]  # compared whole, not 8 bytes per numpy pass
        for r in huge.tolist():
            a, c, n_bytes = int(starts[r]), int(starts[r + 1]), int(lengths[r])
            same[r] = bool(np.array_equal(b.padded[a : a + n_bytes], b.padded[c : c + n_bytes]))
        rows = rows[lengths[rows] <= _VECTOR_BYTES]
        at = 0
        while len(rows):
            left = lengths[rows] - at
            equal = b.word(starts[rows + 1] + at, left) == b.word(starts[rows] + at, left)
            same[rows[~equal]] = False
            rows = rows[equal & (left > 8)]
            at += 8
    return np.concatenate([[0], np.flatnonzero(~same) + 1])


class _QueryCodes:
    """Query ids in order of first appearance (a dict); a block's query column as runs of equal ids."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def runs(self, column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """Each run's code and length."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        n = len(column)
        starts = _run_starts(column)
        if len(starts) > 4096:  # an interleaved file: each distinct id of the block looked up once (C++)
            encoded = pc.dictionary_encode(column.take(_arrow_int64(starts)))
            local = np.array(
                [self.index.setdefault(q, len(self.index)) for q in encoded.dictionary.to_pylist()], dtype=np.int64
            )
            codes = local[_values(encoded.indices, np.int32)]
        else:
            offsets = np.frombuffer(
                column.buffers()[1],
                dtype=np.int64 if pa.types.is_large_string(column.type) else np.int32,
                count=n + 1,
                offset=column.offset * (8 if pa.types.is_large_string(column.type) else 4),
            )
            raw = memoryview(column.buffers()[2])
            codes = np.array(
                [
                    self.index.setdefault(str(raw[a:b], "utf-8"), len(self.index))
                    for a, b in zip(offsets[starts].tolist(), offsets[starts + 1].tolist())
                ],
                dtype=np.int64,
            )
        return codes, np.diff(np.append(starts, n))

    def ids(self) -> tuple[str, ...]:
        return tuple(self.index)


class _Vocabulary:
    """Ids in order of first appearance; turns a block's id column into codes (hash tables in pyarrow)."""

    def __init__(self) -> None:
        self.values = pa.nulls(0, pa.string())

    def codes(self, column: pa.Array | pa.ChunkedArray, out: np.ndarray | None = None) -> np.ndarray:
        """int64 code of each entry of ``column`` (written to ``out`` if given); new ids get the next codes."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        encoded = pc.dictionary_encode(column)
        local = encoded.dictionary
        known = pc.index_in(local, value_set=self.values)
        is_new = pc.is_null(known)
        new = _values(pc.cast(is_new, pa.uint8()), np.uint8).astype(bool)
        mapping = _values(known, np.int32).astype(np.int64)
        mapping[new] = len(self.values) + np.arange(int(new.sum()))
        if new.any():
            self.values = pa.concat_arrays([self.values, pc.filter(local, is_new)])
        return np.take(mapping, _values(encoded.indices, np.int32), out=out)

    def runs(self, column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """``column`` as runs of equal values: each run's code and length (only the first value of a
        run is looked up: query ids of a grouped run cost almost nothing)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        n = len(column)
        if n < 2:
            return self.codes(column), np.ones(n, dtype=np.int64)
        same = pc.cast(pc.equal(column.slice(1), column.slice(0, n - 1)), pa.uint8())
        starts = np.concatenate([[0], np.flatnonzero(_values(same, np.uint8) == 0) + 1])
        return self.codes(column.take(_arrow_int64(starts))), np.diff(np.append(starts, n))


class _Growing:
    """An array appended to block by block. Sized up front to what the file can hold (a line takes
    at least 12 bytes); pages never written are never resident, so only the rows read cost memory."""

    def __init__(self, dtype: type, capacity: int) -> None:
        self.data: np.ndarray = np.empty(capacity, dtype=dtype)
        self.size = 0

    def reserve(self, n: int) -> np.ndarray:
        """The next ``n`` places, to be written by the caller."""
        end = self.size + n
        if end > len(self.data):  # compressed input: sizes are not known up front
            grown = np.empty(max(end, 2 * len(self.data)), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.size = end
        return self.data[end - n : end]

    def append(self, values: np.ndarray) -> None:
        self.reserve(len(values))[:] = values

    def view(self) -> np.ndarray:
        return self.data[: self.size]


def read_trec_run(path: str | Path) -> RankedRun:
    """A TREC run file as a :class:`RankedRun`: queries in order of first appearance, each row in file order.

    Columnar (pyarrow); no per-query dicts. Errors name the file and line, as :func:`read_run`'s.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such run file")
    capacity = path.stat().st_size // 12 + 1
    qids, docs = _Vocabulary(), _Vocabulary()
    d, scores = _Growing(np.int64, capacity), _Growing(np.float64, capacity)
    runs: list[tuple[np.ndarray, np.ndarray]] = []
    rows_per_block: list[int] = []
    lines = _LineCounter(path)

    def add(offset: int, block: memoryview, parsed: Future) -> None:
        columns = parsed.result() or _python_block(path, block, lines.line_at(offset))
        runs.append(qids.runs(columns.qid))
        docs.codes(columns.doc, out=d.reserve(len(columns)))
        for piece in columns.score:
            scores.append(piece)
        rows_per_block.append(len(columns))

    # pyarrow parses the next block (in a thread, without the GIL) while this one's ids are coded
    with ThreadPoolExecutor(max_workers=1) as pool:
        _feed_blocks(path, add, pool)
    query_ids, doc_ids = tuple(qids.values.to_pylist()), tuple(docs.values.to_pylist())
    heads = np.concatenate([r[0] for r in runs]) if runs else np.zeros(0, dtype=np.int64)
    lengths = np.concatenate([r[1] for r in runs]) if runs else np.zeros(0, dtype=np.int64)
    run, order = _ranked(query_ids, doc_ids, heads, lengths, d.view(), scores.view())
    clash = _first_duplicate(run.doc_index)
    if clash is not None:
        row, first, second = clash
        q = np.repeat(heads, lengths)
        rows = [_file_row(order, q, row, slot) for slot in (first, second)]
        clash_lines = _line_numbers(path, rows_per_block, rows)
        raise DataFormatError(
            f"{path}, line {clash_lines[1]}: document {doc_ids[run.doc_index[row, second]]!r} appears twice "
            f"for query {query_ids[row]!r} (first at line {clash_lines[0]}); keep one line per query and "
            "document"
        )
    return run


_KEY_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_LONG_BIT = np.uint64(1 << 59)
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(29))


_KEY_SLICE = 1 << 16  # rows per step: each temporary stays in the cache
_VECTOR_BYTES = 256  # ids up to this long are hashed by numpy, 8 bytes per step; longer ones by hashlib


def id_keys(column: pa.Array | pa.ChunkedArray, out: np.ndarray | None = None) -> np.ndarray:
    """A 63-bit int64 key of each string of ``column``, in numpy (no hash table): an id of up to 7 bytes
    is its bytes and length (exact); a longer one a hash of all its bytes (bit 59 set, so never equal
    to a short id's key): numpy's up to 256 bytes, BLAKE2b's beyond (a megabyte-long id costs a
    millisecond, not a numpy pass per 8 bytes). Equal ids have equal keys. Written to ``out`` if given.

    >>> id_keys(pa.array(["d1", "d1", "doc-0000001", "d2"])).tolist()[:2] == [id_keys(pa.array(["d1"]))[0]] * 2
    True
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    keys = np.empty(n, dtype=np.uint64) if out is None else out.view(np.uint64)
    if n == 0:
        return keys.view(np.int64)
    wide = pa.types.is_large_string(column.type)
    _, offsets_buffer, data_buffer = column.buffers()
    offsets: np.ndarray = np.frombuffer(
        offsets_buffer, dtype=np.int64 if wide else np.int32, count=n + 1, offset=column.offset * (8 if wide else 4)
    )
    end = int(offsets[-1])
    data = np.frombuffer(data_buffer, dtype=np.uint8, count=end) if end else np.zeros(0, dtype=np.uint8)
    # 8 bytes at every offset; the last few ids, whose 8 bytes would run past the data, read a padded copy
    words = np.ndarray((max(end - 7, 0),), dtype="<u8", buffer=data, strides=(1,))
    tail_from = max(end - 16, 0)
    tail = np.zeros(end - tail_from + 16, dtype=np.uint8)
    tail[: end - tail_from] = data[tail_from:]
    tail_words = np.ndarray((len(tail) - 7,), dtype="<u8", buffer=tail, strides=(1,))
    k0, k1, shift = _MIX
    for lo in range(0, n, _KEY_SLICE):
        hi = min(lo + _KEY_SLICE, n)
        starts = offsets[lo:hi]
        lengths = offsets[lo + 1 : hi + 1] - starts
        size = np.minimum(lengths, 8)
        near_end = starts > end - 8
        if near_end.any():
            safe = np.where(near_end, 0, starts)
            got = words[safe] if len(words) else np.zeros(len(safe), dtype=np.uint64)
            got[near_end] = tail_words[starts[near_end] - tail_from]
        else:
            got = words[starts]
        got &= _KEY_MASKS[size]
        got |= lengths.astype(np.uint64) << np.uint64(56)
        keys[lo:hi] = got
        very_long = np.flatnonzero(lengths > _VECTOR_BYTES)
        for row in very_long.tolist():  # one step per 8 bytes would cost a numpy pass per step: hashlib
            a, b = int(starts[row]), int(starts[row] + lengths[row])
            digest = int.from_bytes(hashlib.blake2b(data[a:b].tobytes(), digest_size=8).digest(), "little")
            keys[lo + row] = np.uint64(digest & ((1 << 59) - 1)) | _LONG_BIT
        long = np.flatnonzero((lengths > 7) & (lengths <= _VECTOR_BYTES))
        if len(long):  # hashed 8 bytes at a time
            at, left = starts[long].astype(np.int64), lengths[long].astype(np.int64)
            h = left.astype(np.uint64) * k0
            long = long + lo
            while len(at):
                step = np.where(
                    at > end - 8,
                    tail_words[np.clip(at - tail_from, 0, len(tail_words) - 1)],
                    words[np.minimum(at, len(words) - 1)] if len(words) else np.uint64(0),
                )
                h ^= step & _KEY_MASKS[np.minimum(left, 8)]
                h *= k1
                h ^= h >> shift
                more = left > 8
                if not more.all():
                    done = ~more
                    keys[long[done]] = (h[done] & np.uint64((1 << 59) - 1)) | _LONG_BIT
                    long, h, at, left = long[more], h[more], at[more], left[more]
                at, left = at + 8, left - 8
    return keys.view(np.int64)


def read_keyed_run(path: str | Path) -> KeyedRun | None:
    """A TREC run file as a :class:`KeyedRun` (doc ids as strings and keys, no vocabulary); None when
    some query holds two equal keys: a document listed twice (:func:`read_trec_run` names the lines)
    or, all but never, two ids sharing a key."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such run file")
    capacity = path.stat().st_size // 12 + 1
    qids = _QueryCodes()
    d, scores = _Growing(np.int64, capacity), _Growing(np.float64, capacity)
    runs: list[tuple[np.ndarray, np.ndarray]] = []
    long_rows: list[np.ndarray] = []
    long_docs: list[pa.Array] = []
    lines = _LineCounter(path)

    def add(offset: int, block: memoryview, parsed: Future) -> None:
        columns = parsed.result() or _python_block(path, block, lines.line_at(offset))
        runs.append(qids.runs(columns.qid))
        doc = columns.doc.combine_chunks() if isinstance(columns.doc, pa.ChunkedArray) else columns.doc
        first = d.size
        keys = id_keys(doc, out=d.reserve(len(columns)))
        long = np.flatnonzero(keys >> 59)  # ids of more than 7 bytes: hashed, so kept as strings
        if len(long):
            long_rows.append(long + first)
            long_docs.append(doc.take(_arrow_int64(long)))
        for piece in columns.score:
            scores.append(piece)

    with ThreadPoolExecutor(max_workers=1) if _parse_ahead() else _Inline() as pool:
        _feed_blocks(path, add, pool)
    query_ids = qids.ids()
    heads = np.concatenate([r[0] for r in runs]) if runs else np.zeros(0, dtype=np.int64)
    lengths = np.concatenate([r[1] for r in runs]) if runs else np.zeros(0, dtype=np.int64)
    run, order = _ranked(query_ids, (), heads, lengths, d.view(), scores.view())
    if _has_repeat(run.doc_index):
        return None
    position = None
    if run.doc_index.base is None or order is not None:  # padded or regrouped: where each slot comes from
        rows = np.arange(len(d.view()), dtype=np.int64)
        position = _ranked(query_ids, (), heads, lengths, rows, scores.view())[0].doc_index
    rows = np.concatenate(long_rows) if long_rows else np.zeros(0, dtype=np.int64)
    names = pa.concat_arrays(long_docs) if long_docs else pa.nulls(0, pa.string())
    return KeyedRun(query_ids, run.doc_index, run.scores, rows, names, position)


class _Inline:
    """An executor that runs each task when it is submitted."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Any, *args: Any) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        return future


def _parse_ahead() -> bool:
    """Whether pyarrow should parse the next block in a thread while this one is keyed: only when a core
    is idle (on a busy machine the two threads take turns on one core, and the handovers cost more
    than they save). ``EMBEDSCOPE_PARSE_AHEAD=0/1`` decides instead."""
    forced = os.environ.get("EMBEDSCOPE_PARSE_AHEAD")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        cores = len(os.sched_getaffinity(0))
        return os.getloadavg()[0] + 1 <= cores
    except (AttributeError, OSError):
        return True


def _has_repeat(index: np.ndarray, chunk: int = 1024) -> bool:
    """Whether any row holds a value >= 0 twice. Rows are sorted as 32-bit folds of the values (twice
    as fast as 64-bit); only rows where two folds are equal are checked again in full."""
    for start in range(0, len(index), chunk):
        part = index[start : start + chunk]
        folded = np.sort((part ^ (part >> 32)).astype(np.int32), axis=1)
        suspects = np.flatnonzero((folded[:, 1:] == folded[:, :-1]).any(axis=1))
        if len(suspects):
            block = np.sort(part[suspects], axis=1)
            if ((block[:, 1:] == block[:, :-1]) & (block[:, 1:] >= 0)).any():
                return True
    return False


def _ranked(
    query_ids: tuple[str, ...],
    doc_ids: tuple[str, ...],
    heads: np.ndarray,
    lengths: np.ndarray,
    d: np.ndarray,
    scores: np.ndarray,
) -> tuple[RankedRun, np.ndarray | None]:
    """Rows by query (file order kept within a row) from the runs of equal query codes (``heads``,
    ``lengths``); also the stable order used when the file is not grouped by query."""
    n = len(query_ids)
    counts = np.bincount(heads, weights=lengths, minlength=n).astype(np.int64)
    depth = int(counts.max(initial=0))
    order = None
    grouped = len(heads) == 0 or int(np.count_nonzero(heads[1:] != heads[:-1])) + 1 == n  # one run per query
    if not grouped:
        q = np.repeat(heads, lengths)
        order = np.argsort(q, kind="stable")
        q, d, scores = q[order], d[order], scores[order]
    if n and bool((counts == depth).all()):  # every query has the same number of lines: views, no copies
        return RankedRun(query_ids, doc_ids, d.reshape(n, depth), scores.reshape(n, depth)), order
    if grouped:
        q = np.repeat(np.arange(n), counts)
    col = np.arange(len(q)) - np.repeat(np.cumsum(counts) - counts, counts)
    index = np.full((n, depth), -1, dtype=np.int64)
    matrix = np.full((n, depth), -np.inf, dtype=np.float64)
    index[q, col] = d
    matrix[q, col] = scores
    return RankedRun(query_ids, doc_ids, index, matrix), order


def _first_duplicate(index: np.ndarray, chunk: int = 1024) -> tuple[int, int, int] | None:
    """``(row, first slot, second slot)`` of the earliest repeated doc in any row, or None."""
    clashes: list[tuple[int, int, int]] = []
    for start in range(0, len(index), chunk):
        block = np.sort(index[start : start + chunk].astype(np.int32), axis=1)  # codes < 2**31: int32 sorts faster
        repeated = (block[:, 1:] == block[:, :-1]) & (block[:, 1:] >= 0)
        for row in np.flatnonzero(repeated.any(axis=1)) + start:
            values = index[row]
            _, first_slot = np.unique(values, return_index=True)
            later = np.setdiff1d(np.flatnonzero(values >= 0), first_slot)
            second = int(later.min())
            clashes.append((int(row), int(np.flatnonzero(values == values[second])[0]), second))
    return min(clashes, key=lambda c: (c[2], c[0])) if clashes else None


def _file_row(order: np.ndarray | None, q: np.ndarray, row: int, slot: int) -> int:
    """Position among the file's non-blank lines of the entry at ``(row, slot)``."""
    position = int(np.searchsorted(np.sort(q) if order is not None else q, row)) + slot
    return int(order[position]) if order is not None else position


def _line_numbers(path: Path, rows_per_block: list[int], rows: list[int]) -> list[int]:
    """Line numbers of the given non-blank-line positions, re-reading only the blocks that hold them."""
    ends = np.cumsum(rows_per_block)
    found: dict[int, int] = {}
    counter = _LineCounter(path)
    for b, (offset, block) in enumerate(_blocks(path)):
        start = int(ends[b]) - rows_per_block[b]
        wanted = {r for r in rows if start <= r < ends[b]}
        if wanted:
            position = start
            first_line = counter.line_at(offset)
            for lineno, line in enumerate(str(block, "utf-8", errors="replace").split("\n"), start=first_line):
                if line.split():
                    if position in wanted:
                        found[position] = lineno
                    position += 1
        if len(found) == len(set(rows)):
            break
    return [found[r] for r in rows]


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Qrels from TREC (``qid 0 docid rel``), BEIR TSV (header ``query-id corpus-id score``), EvalScope
    ``qrels.jsonl`` (``{"query-id", "corpus-id", "score"}`` per line) or JSON ``{qid: {docid: rel}}``.

    Zero judgments are kept. Relevance must be an integer.
    """
    path = Path(path)
    qrels = _read_qrels(path)
    if not any(qrels.values()):
        raise DataFormatError(
            f"qrels {path} has no judgments; give lines 'qid 0 docid relevance' (TREC) or 'query-id corpus-id "
            "score' (BEIR)"
        )
    return qrels


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    text = _text(path, "qrels")
    data = _json_mapping(path, text)
    if data is not None:
        return {
            str(q): {str(d): as_relevance(r, f"{path}, query {clip(q)}, document {clip(d)}") for d, r in docs.items()}
            for q, docs in data.items()
        }
    qrels: dict[str, dict[str, int]] = {}
    places: dict[tuple[str, str], str] = {}
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.lstrip().startswith("{"):  # EvalScope qrels.jsonl, whatever the file is called
        from embedscope.data.jsonl import iter_jsonl
        from embedscope.data.tables import DEFAULTS

        for lineno, row in iter_jsonl(path):
            where = f"{path}, line {lineno}"
            qid = as_id(pick(row, DEFAULTS["query-id"], where, "query-id"), where, "query-id")
            doc = as_id(pick(row, DEFAULTS["corpus-id"], where, "corpus-id"), where, "corpus-id")
            add_judgment(
                qrels, places, qid, doc, as_relevance(pick(row, DEFAULTS["score"], where, "score"), where), where
            )
        return qrels
    header = first.split()
    has_header = bool(header) and header[0].lower() in _QID_HEADERS
    fast = _columnar_qrels(text, first, has_header)
    if fast is not None:
        return fast
    seen_header = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if has_header and not seen_header:
            seen_header = True
            continue
        where = f"{path}, line {lineno}"
        if len(parts) == 4:
            qid, doc, rel = parts[0], parts[2], parts[3]
        elif len(parts) == 3:
            qid, doc, rel = parts
        else:
            raise DataFormatError(
                f"{where}: expected 'qid 0 docid relevance' (TREC) or 'query-id corpus-id score' "
                f"(BEIR), got {len(parts)} fields"
            )
        add_judgment(
            qrels, places, as_id(qid, where, "query id"), as_id(doc, where, "doc id"), as_relevance(rel, where), where
        )
    return qrels


def _columnar_qrels(text: str, first: str, has_header: bool) -> dict[str, dict[str, int]] | None:
    """TREC or BEIR qrels in canonical form (one delimiter between fields, integer judgments, no pair
    judged twice differently) read by pyarrow; None leaves the file to the line-by-line reading,
    which names the line of any problem."""
    width = len(first.split())
    if width not in (3, 4) or not text.startswith(first):
        return None
    names = ["qid", "iter", "doc", "rel"] if width == 4 and not has_header else ["qid", "doc", "rel"]
    try:
        table = pacsv.read_csv(
            pa.BufferReader(text.encode("utf-8")),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1 if has_header else 0),
            parse_options=pacsv.ParseOptions(
                delimiter="\t" if "\t" in first else " ", quote_char=False, escape_char=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={"qid": pa.string(), "doc": pa.string(), "rel": pa.int64()},
                include_columns=["qid", "doc", "rel"],
                null_values=[],
                strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid:
        return None
    qrels: dict[str, dict[str, int]] = {}
    for qid, doc, rel in zip(*(table[c].to_pylist() for c in ("qid", "doc", "rel"))):
        if not qid or not doc or qrels.setdefault(qid, {}).setdefault(doc, rel) != rel:
            return None
    return qrels


def _check_token(value: str, what: str) -> str:
    value = str(value)
    if not value or any(c.isspace() for c in value):
        raise DataFormatError(
            f"{what} {value!r} is empty or contains whitespace, which the TREC run format cannot "
            "hold; use ids without spaces (or write JSON)"
        )
    return value


def write_trec_run(run: Mapping[str, Mapping[str, float]], path: str | Path, tag: str = "embedscope") -> None:
    """Write a TREC run: per query, documents by score descending (ties by doc id descending, as trec_eval
    orders them), ranks from 1. Scores are written with full precision (``repr`` of the float), so
    :func:`read_run` gives back exactly the same values. The file is replaced atomically."""
    tag = _check_token(tag, "run tag")
    lines: list[str] = []
    for qid, docs in run.items():
        qid = _check_token(qid, "query id")
        ranked = sorted(
            ((str(d), float(s)) for d, s in docs.items()), key=lambda item: (item[1], item[0]), reverse=True
        )
        for rank, (doc, score) in enumerate(ranked, start=1):
            lines.append(f"{qid} Q0 {_check_token(doc, 'document id')} {rank} {score!r} {tag}")
    path = Path(path)
    if path.is_dir():
        raise DataFormatError(f"{path} is a folder: give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
