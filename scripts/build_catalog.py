"""Regenerate ``src/embedscope/tasks/catalog.json.gz`` from the installed ``mteb`` task metadata (offline).

The catalog is declarative data (name, type, dataset path and pinned revision, splits, languages,
main score, protocol parameters, size from mteb's descriptive statistics, description, and mteb's
``dataset_transform`` where it is a simple rename / subsample / concatenation / flattening); embedscope
reads it at run time without ``mteb``. Every text task of the registered task types that mteb lists (not
superseded) is included, plus the superseded ones that a benchmark or an embedscope suite names.
``benchmarks`` maps each of mteb's benchmarks to its task names.

    .venv/bin/python scripts/build_catalog.py
"""

from __future__ import annotations

import ast
import gzip
import inspect
import json
import re
from pathlib import Path

import mteb

from embedscope.tasks.types import TASK_TYPES

C_MTEB = """T2Retrieval MMarcoRetrieval DuRetrieval CovidRetrieval CmedqaRetrieval EcomRetrieval MedicalRetrieval
VideoRetrieval T2Reranking MMarcoReranking CMedQAv1-reranking CMedQAv2-reranking Ocnli Cmnli CLSClusteringS2S
CLSClusteringP2P ThuNewsClusteringS2S ThuNewsClusteringP2P ATEC BQ LCQMC PAWSX STSB AFQMC QBQTC TNews IFlyTek
MultilingualSentiment JDReview OnlineShopping Waimai""".split()
RU_MTEB = """GeoreviewClassification GeoreviewClusteringP2P HeadlineClassification InappropriatenessClassification
KinopoiskClassification RiaNewsRetrieval RuBQRetrieval RuReviewsClassification RuSciBenchGRNTIClassification
RuSciBenchGRNTIClusteringP2P RuSciBenchOECDClassification RuSciBenchOECDClusteringP2P RuSTSBenchmarkSTS TERRa
RuBQReranking CEDRClassification SensitiveTopicsClassification""".split()
RU_MTEB_MULTILINGUAL = """MassiveIntentClassification MassiveScenarioClassification MIRACLReranking MIRACLRetrieval
STS22 RUParaPhraserSTS""".split()
ENGLISH = """SciFact NFCorpus ArguAna FiQA2018 SCIDOCS TRECCOVID Touche2020 QuoraRetrieval CQADupstackEnglishRetrieval
STS12 STS13 STS14 STS15 STS16 STS17 SICK-R STSBenchmark BIOSSES Banking77Classification EmotionClassification
AmazonCounterfactualClassification ImdbClassification ToxicConversationsClassification
TweetSentimentExtractionClassification MTOPIntentClassification TwentyNewsgroupsClustering RedditClustering
StackExchangeClustering ArxivClusteringS2S MedrxivClusteringS2S BiorxivClusteringS2S SprintDuplicateQuestions
TwitterSemEval2015 TwitterURLCorpus AskUbuntuDupQuestions SciDocsRR StackOverflowDupQuestions""".split()
ALIASES = {
    "RUParaphraserSTS": "RUParaPhraserSTS",
    "CMedQAv1": "CMedQAv1-reranking",
    "CMedQAv2": "CMedQAv2-reranking",
    "STSBenchmarkSTS": "STSBenchmark",
    "Banking77": "Banking77Classification",
}
SUITES = {"C-MTEB": C_MTEB, "ruMTEB": RU_MTEB + RU_MTEB_MULTILINGUAL, "MTEB(eng)": ENGLISH}
PARAMS = (
    "samples_per_label",
    "n_experiments",
    "train_split",
    "label_column_name",
    "input_column_name",
    "min_score",
    "max_score",
    "max_fraction_of_documents_to_embed",
    "max_document_to_embed",
    "max_documents_per_cluster",
    "max_depth",
    "n_clusters",
    "ignore_identical_ids",
    "skip_first_result",
    "k_values",
    "max_eval_samples",
    "is_cross_validation",
    "fast_loading",
    "parallel_subsets",
)


def types() -> list[str]:
    """The task types embedscope runs: every registered one (:mod:`embedscope.tasks.types`)."""
    return TASK_TYPES.names()


def protocol(task) -> str:
    """The catalog's protocol of an mteb task: that of the first class in its MRO that a registered type
    reproduces (``AbsTaskClusteringLegacy`` → ``clustering-legacy`` …), else its base class's name."""
    protocols = {base: name for t in TASK_TYPES for base, name in t.mteb_protocols}
    names = [c.__name__ for c in type(task).__mro__]
    return next((protocols[n] for n in names if n in protocols), names[1])


def _literal(text: str, default):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return default


def transform_note(task) -> dict:
    """What mteb's ``dataset_transform`` of this task does: subsampling, column renames, anything else."""
    cls = type(task)
    if "dataset_transform" not in cls.__dict__:
        return {}
    source = inspect.getsource(cls.dataset_transform)
    out: dict = {}
    if "stratified_subsampling" in source:
        n = re.search(r"n_samples\s*=\s*(\d+)", source)
        splits = re.search(r"splits\s*=\s*(\[[^\]]*\])", source)
        out["stratified_subsample"] = {
            "n_samples": int(n.group(1)) if n else 2048,
            "splits": _literal(splits.group(1), None) if splits else ["test"],
        }
        if out["stratified_subsample"]["splits"] is None:  # splits computed at run time: not expressible
            del out["stratified_subsample"]
    renames = dict(re.findall(r"rename_column\(\s*\"([^\"]+)\",\s*\"([^\"]+)\"\s*\)", source))
    for block in re.findall(r"rename_columns\(\s*(\{[^}]*\})", source, re.S):
        renames.update(_literal(block, {}))
    if renames:
        out["rename_columns"] = renames
    concat = re.search(r"for split in (\[[^\]]*\]):", source)
    if concat and ".extend(self.dataset[" in source:  # SIB-200: every split of a subset concatenated into "test"
        columns = dict(re.findall(r"(\w+)\.extend\(self\.dataset\[\w+\]\[split\]\[\"(\w+)\"\]\)", source))
        into = re.search(r"\{\"(\w+)\":\s*split_ds\}", source)
        out["concat_splits"] = {
            "splits": _literal(concat.group(1), []),
            "into": into.group(1) if into else "test",
            "columns": {old: new for new, old in columns.items()},
        }
    if (
        re.search(r"chain\.from_iterable\(\s*self\.dataset\[split\]\[\"labels\"\]", source)
        and "pop(" not in source
        and "split_labels" not in source
    ):
        out["flatten_sets"] = True  # legacy clustering sets (one row of lists per set) → one row per text
    body = source.split(":", 1)[1] if ")" in source else source
    other = [
        ln.strip()
        for ln in body.splitlines()[1:]
        if ln.strip()
        and not re.search(
            r"stratified_subsampling|rename_column|num_proc|^self\.dataset,|^seed=|^splits=|"
            r"^n_samples=|^label=|^\{\"|^\)|^\}|^\"|^#|^\w+\s*=\s*self\.|:\s*\"\w+\",?$",
            ln.strip(),
        )
    ]
    if out.get("concat_splits") or out.get("flatten_sets"):
        other = [
            ln
            for ln in other
            if not re.search(
                r"^(ds|labels|sentences|split_ds|lang_dict|_check_label|for |"
                r"self\.dataset = DatasetDict|self\.dataset\[lang\] = self|"
                r"ds\[|self\.hf_subsets|label=|self\.seed|self\.metadata|"
                r"self\.dataset,$)",
                ln,
            )
        ]
    if other:
        out["transform"] = "mteb's dataset_transform also does: " + " ".join(other)[:300]
    return out


def custom_loader(task) -> dict:
    """Tasks whose class loads data its own way (``load_data`` overridden): noted, not reproduced."""
    for cls in type(task).__mro__:
        if "load_data" in cls.__dict__:
            return {} if cls.__module__.startswith("mteb.abstasks") else {"custom_load": cls.__name__}
    return {}


def size(task) -> dict:
    """Samples (and documents / queries for retrieval) over the eval splits, from mteb's descriptive stats."""
    try:
        stats = task.metadata.descriptive_stats or {}
    except Exception:  # noqa: BLE001 - a malformed stats file only loses the size column
        return {}
    out: dict[str, int] = {}
    for split in task.metadata.eval_splits:
        for key, name in (("num_samples", "samples"), ("num_documents", "documents"), ("num_queries", "queries")):
            value = (stats.get(split) or {}).get(key)
            if isinstance(value, int):
                out[name] = out.get(name, 0) + value
    return {"size": out} if out else {}


def entry(name: str) -> dict:
    task = mteb.get_task(name)
    m = task.metadata
    superseded = getattr(m, "superseded_by", None)
    params = {}
    for p in PARAMS:
        value = getattr(task, p, None)
        if isinstance(value, (int, float, str, bool, list, tuple)) and not isinstance(value, type):
            params[p] = list(value) if isinstance(value, tuple) else value
    langs = m.eval_langs
    return {
        "name": m.name,
        "type": m.type,
        "protocol": protocol(task),
        "dataset": {
            "path": m.dataset["path"],
            "revision": m.dataset["revision"],
            **({"name": m.dataset["name"]} if m.dataset.get("name") else {}),
        },
        "eval_splits": list(m.eval_splits),
        "hf_subsets": langs if isinstance(langs, dict) else {"default": list(langs)},
        "languages": sorted(
            {lang.split("-")[0] for ls in (langs.values() if isinstance(langs, dict) else [langs]) for lang in ls}
        ),
        "main_score": m.main_score,
        "category": m.category,
        "params": params,
        **transform_note(task),
        **custom_loader(task),
        **size(task),
        **({"superseded_by": superseded} if superseded else {}),
        "description": " ".join(m.description.split()),
        "reference": m.reference,
        "suites": sorted(s for s, names in SUITES.items() if name in names),
    }


def is_text_task(task) -> bool:
    return task.metadata.type in types() and set(task.metadata.modalities) == {"text"}


def benchmarks() -> dict[str, list[str]]:
    """Every benchmark mteb defines → its task names (all modalities; the catalog runs the text ones)."""
    return {b.name: [t.metadata.name for t in b.tasks] for b in mteb.get_benchmarks()}


def benchmark_subsets() -> dict[str, dict[str, list[str]]]:
    """Per benchmark, the subsets it keeps of each multi-subset text task, where mteb filters them by language."""
    out: dict[str, dict[str, list[str]]] = {}
    for b in mteb.get_benchmarks():
        for t in b.tasks:
            langs = t.metadata.eval_langs
            if is_text_task(t) and isinstance(langs, dict) and len(langs) > 1 and set(t.hf_subsets) != set(langs):
                out.setdefault(b.name, {})[t.metadata.name] = list(t.hf_subsets)
    return out


def main() -> None:
    suite_names = C_MTEB + RU_MTEB + RU_MTEB_MULTILINGUAL + ENGLISH
    current = sorted(t.metadata.name for t in mteb.get_tasks() if is_text_task(t))
    bench = benchmarks()
    named = {n for names in bench.values() for n in names}
    extra = sorted(n for n in named - set(current) - set(suite_names) if is_text_task(mteb.get_task(n)))
    names = list(dict.fromkeys(suite_names + current + extra))
    catalog = {
        "generated_from": f"mteb {mteb.__version__}",
        "aliases": ALIASES,
        "suites": SUITES,
        "benchmarks": bench,
        "benchmark_subsets": benchmark_subsets(),
        "tasks": [entry(n) for n in names],
    }
    out = Path(__file__).resolve().parents[1] / "src" / "embedscope" / "tasks" / "catalog.json.gz"
    data = json.dumps(catalog, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"{len(catalog['tasks'])} tasks, {len(bench)} benchmarks → {out} ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
