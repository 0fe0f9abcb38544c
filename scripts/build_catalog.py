"""Regenerate ``src/embedscope/tasks/catalog.json`` from the installed ``mteb`` task metadata.

The catalog is declarative data (name, type, dataset path and pinned revision, splits, languages,
main score, protocol parameters, description); embedscope reads it at run time without ``mteb``.

    .venv/bin/python scripts/build_catalog.py
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import mteb

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
ALIASES = {"RUParaphraserSTS": "RUParaPhraserSTS", "CMedQAv1": "CMedQAv1-reranking", "CMedQAv2": "CMedQAv2-reranking",
           "STSBenchmarkSTS": "STSBenchmark", "Banking77": "Banking77Classification"}
SUITES = {"C-MTEB": C_MTEB, "ruMTEB": RU_MTEB + RU_MTEB_MULTILINGUAL, "MTEB(eng)": ENGLISH}
PARAMS = ("samples_per_label", "n_experiments", "train_split", "label_column_name", "input_column_name",
          "min_score", "max_score", "max_fraction_of_documents_to_embed", "max_document_to_embed",
          "max_documents_per_cluster", "max_depth", "n_clusters", "ignore_identical_ids", "skip_first_result",
          "k_values", "max_eval_samples", "is_cross_validation")


def protocol(task) -> str:
    names = [c.__name__ for c in type(task).__mro__]
    for base, name in (("AbsTaskClusteringLegacy", "clustering-legacy"), ("AbsTaskClustering", "clustering-v2"),
                       ("AbsTaskMultilabelClassification", "multilabel"), ("AbsTaskClassification", "classification"),
                       ("AbsTaskPairClassification", "pair-classification"), ("AbsTaskSTS", "sts"),
                       ("AbsTaskRetrieval", "retrieval")):
        if base in names:
            return name
    return names[1]


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
        out["stratified_subsample"] = {"n_samples": int(n.group(1)) if n else 2048,
                                       "splits": ast.literal_eval(splits.group(1)) if splits else ["test"]}
    renames = dict(re.findall(r"rename_column\(\s*\"([^\"]+)\",\s*\"([^\"]+)\"\s*\)", source))
    for block in re.findall(r"rename_columns\(\s*(\{[^}]*\})", source, re.S):
        renames.update(ast.literal_eval(block))
    if renames:
        out["rename_columns"] = renames
    body = source.split(":", 1)[1] if ")" in source else source
    other = [ln.strip() for ln in body.splitlines()[1:] if ln.strip()
             and not re.search(r"stratified_subsampling|rename_column|num_proc|^self\.dataset,|^seed=|^splits=|"
                               r"^n_samples=|^label=|^\{\"|^\)|^\}|^\"|^#|^\w+\s*=\s*self\.|:\s*\"\w+\",?$", ln.strip())]
    if other:
        out["transform"] = "mteb's dataset_transform also does: " + " ".join(other)[:300]
    return out


def entry(name: str) -> dict:
    task = mteb.get_task(name)
    m = task.metadata
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
        "dataset": {"path": m.dataset["path"], "revision": m.dataset["revision"],
                    **({"name": m.dataset["name"]} if m.dataset.get("name") else {})},
        "eval_splits": list(m.eval_splits),
        "hf_subsets": langs if isinstance(langs, dict) else {"default": list(langs)},
        "languages": sorted({lang.split("-")[0] for ls in (langs.values() if isinstance(langs, dict) else [langs])
                             for lang in ls}),
        "main_score": m.main_score,
        "category": m.category,
        "params": params,
        **transform_note(task),
        "description": " ".join(m.description.split()),
        "reference": m.reference,
        "suites": sorted(s for s, names in SUITES.items() if name in names),
    }


def main() -> None:
    names = list(dict.fromkeys(C_MTEB + RU_MTEB + RU_MTEB_MULTILINGUAL + ENGLISH))
    catalog = {"generated_from": f"mteb {mteb.__version__}", "aliases": ALIASES,
               "suites": SUITES, "tasks": [entry(n) for n in names]}
    out = Path(__file__).resolve().parents[1] / "src" / "embedscope" / "tasks" / "catalog.json"
    out.write_text(json.dumps(catalog, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(catalog['tasks'])} tasks → {out}")


if __name__ == "__main__":
    main()
