"""fastbook-benchmark-style QA files: questions whose answers have several components, each
satisfied by any of several context passages (seed 001).

``{"questions": [{chapter, question_number, question_text, gold_standard_answer,
answer_context: [{answer_component, scoring_type, context: [...], explicit_context,
extraneous_answer}], question_context: [{question_component, context: [...]}]}]}``.
The ``"true"``/``"false"`` strings become booleans. As in the published file, an
``answer_component`` may be a list of strings: it is one component, its parts kept in ``parts``
(its text is the parts joined by newlines).

>>> b = parse_benchmark({"questions": [{"chapter": 1, "question_number": 2, "question_text": "Q?",
...     "gold_standard_answer": "A", "answer_context": [{"answer_component": "A", "scoring_type": "simple",
...     "context": ["a passage"], "explicit_context": "true", "extraneous_answer": "false"}],
...     "question_context": []}]})
>>> b.questions[0].components[0].explicit_context, b.questions[0].qid
(True, '1-2')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from embedscope.errors import DataFormatError

FASTBOOK_URL = (
    "https://raw.githubusercontent.com/vishalbakshi/fastbook-benchmark/refs/heads/main/fastbook-benchmark.json"
)


@dataclass(frozen=True)
class AnswerComponent:
    answer_component: str
    scoring_type: str
    context: tuple[str, ...]
    explicit_context: bool
    extraneous_answer: bool
    parts: tuple[str, ...] = ()
    """The component's text pieces when the file gives a list (else empty)."""


@dataclass(frozen=True)
class QuestionContext:
    """A passage addressing part of the question (kept as data; the study's scoring does not use it)."""

    question_component: str
    context: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    chapter: int
    question_number: int
    question_text: str
    gold_standard_answer: str
    components: tuple[AnswerComponent, ...]
    question_context: tuple[QuestionContext, ...] = ()

    @property
    def qid(self) -> str:
        """``"<chapter>-<question_number>"``, the query id used in runs and exports."""
        return f"{self.chapter}-{self.question_number}"

    @property
    def query_text(self) -> str:
        """The question as a search query: surrounding quotes stripped (as in the seed's study)."""
        return self.question_text.strip().strip('"').strip()


@dataclass(frozen=True)
class Benchmark:
    questions: tuple[Question, ...]
    source: str = ""

    def chapters(self) -> list[int]:
        return sorted({q.chapter for q in self.questions})


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise DataFormatError(f'{where}: expected "true" or "false", got {value!r}')


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def int_field(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise DataFormatError(f"{where}: expected a whole number, got {value!r}")
    return int(value)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise DataFormatError(f"{where}: expected a list of strings, got {type(value).__name__}")
    return tuple(_str(v, f"{where}[{i}]") for i, v in enumerate(value))


def _object(raw: Any, where: str, required: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise DataFormatError(f"{where}: expected an object, got {type(raw).__name__}")
    missing = [k for k in required if k not in raw]
    if missing:
        raise DataFormatError(f"{where}: missing field(s) {missing}")
    return raw


def _text_or_parts(value: Any, where: str) -> tuple[str, tuple[str, ...]]:
    """A string, or a list of strings (one text made of parts): ``(text, parts)``."""
    if isinstance(value, list):
        parts = _strings(value, where)
        if not parts:
            raise DataFormatError(f"{where}: expected a string or a non-empty list of strings, got an empty list")
        return "\n".join(parts), parts
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: expected a string or a list of strings, got {type(value).__name__}")
    return value, ()


def _question_context(raw: Any, where: str) -> QuestionContext:
    raw = _object(raw, where, ("question_component", "context"))
    return QuestionContext(
        _str(raw["question_component"], f"{where}.question_component"), _strings(raw["context"], f"{where}.context")
    )


def _component(raw: Any, where: str) -> AnswerComponent:
    raw = _object(raw, where, ("answer_component", "context"))
    text, parts = _text_or_parts(raw["answer_component"], f"{where}.answer_component")
    context = _strings(raw["context"], f"{where}.context")
    # the benchmark's README: a component is implicit when its contexts do not address it *or are empty*; two
    # published components carry no flag, one of them with an empty context
    explicit_default = "true" if context else "false"
    return AnswerComponent(
        answer_component=text,
        parts=parts,
        scoring_type=_str(raw.get("scoring_type", "simple"), f"{where}.scoring_type"),
        context=context,
        explicit_context=_bool(raw.get("explicit_context", explicit_default), f"{where}.explicit_context"),
        extraneous_answer=_bool(raw.get("extraneous_answer", "false"), f"{where}.extraneous_answer"),
    )


def _question(raw: Any, where: str) -> Question:
    if not isinstance(raw, Mapping):
        raise DataFormatError(f"{where}: expected an object, got {type(raw).__name__}")
    required = ("chapter", "question_number", "question_text", "answer_context")
    missing = [k for k in required if k not in raw]
    if missing:
        raise DataFormatError(f"{where}: missing field(s) {missing} (required: {', '.join(required)})")
    components = raw["answer_context"]
    if not isinstance(components, list) or not components:
        raise DataFormatError(f"{where}.answer_context: expected a non-empty list of answer components")
    return Question(
        chapter=int_field(raw["chapter"], f"{where}.chapter"),
        question_number=int_field(raw["question_number"], f"{where}.question_number"),
        question_text=_str(raw["question_text"], f"{where}.question_text"),
        gold_standard_answer=_str(raw.get("gold_standard_answer", ""), f"{where}.gold_standard_answer"),
        components=tuple(_component(c, f"{where}.answer_context[{i}]") for i, c in enumerate(components)),
        question_context=_question_contexts(raw.get("question_context"), f"{where}.question_context"),
    )


def _question_contexts(value: Any, where: str) -> tuple[QuestionContext, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DataFormatError(
            f"{where}: expected a list of {{question_component, context}} objects, got {type(value).__name__}"
        )
    return tuple(_question_context(v, f"{where}[{i}]") for i, v in enumerate(value))


def parse_benchmark(data: Any, source: str = "benchmark") -> Benchmark:
    """Validate a parsed benchmark JSON; errors name the question index, its id and the field."""
    if not isinstance(data, Mapping) or not isinstance(data.get("questions"), list):
        raise DataFormatError(f'{source}: expected {{"questions": [...]}} at the top level')
    questions = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data["questions"]):
        label = f"{source}: questions[{i}]"
        if isinstance(raw, Mapping) and "chapter" in raw and "question_number" in raw:
            label += f" (chapter {raw['chapter']}, question {raw['question_number']})"
        q = _question(raw, label)
        if q.qid in seen:
            raise DataFormatError(f"{label}: duplicate of questions[{seen[q.qid]}] (same chapter and question_number)")
        seen[q.qid] = i
        questions.append(q)
    if not questions:
        raise DataFormatError(f"{source}: no questions")
    return Benchmark(tuple(questions), source)


def load_benchmark(path_or_url: str | Path = FASTBOOK_URL) -> Benchmark:
    """Load a benchmark from a local JSON file, or from its URL when online."""
    text_source = str(path_or_url)
    if text_source.startswith(("http://", "https://")):
        import urllib.request

        try:
            with urllib.request.urlopen(text_source, timeout=30) as response:  # noqa: S310 (http/https only)
                text = response.read().decode("utf-8")
        except OSError as e:
            raise DataFormatError(f"{text_source}: cannot download ({e}); download it and pass the local file") from e
    else:
        path = Path(text_source)
        if not path.is_file():
            raise DataFormatError(f"{path}: no such benchmark file")
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{text_source}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    return parse_benchmark(data, text_source)


def read_keyword_queries(path: str | Path, benchmark: Benchmark | None = None) -> dict[str, str]:
    """A keywords CSV (``chapter,question_number,question_text,keywords``) → ``{qid: keywords}``."""
    import csv
    import io

    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such keywords file")
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    with io.StringIO(text, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("chapter", "question_number", "keywords") if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(
                f"{path}: missing column(s) {missing}; the header must be "
                "chapter,question_number,question_text,keywords"
            )
        for line, row in enumerate(reader, start=2):
            chapter = int_field(row["chapter"], f"{path}:{line} chapter")
            number = int_field(row["question_number"], f"{path}:{line} question_number")
            out[f"{chapter}-{number}"] = row["keywords"] or ""
    if benchmark is not None:
        unknown = sorted(set(out) - {q.qid for q in benchmark.questions})
        if unknown:
            raise DataFormatError(f"{path}: keywords for questions not in the benchmark: {unknown[:5]}")
    return out


@lru_cache(maxsize=200_000)
def fixed(text: str) -> str:
    """``ftfy.fix_text``, memoised (passages are compared with many contexts): the rule by which a passage holds a
    context string."""
    from ftfy import fix_text

    return fix_text(text)
