"""mteb itself on local data of the task types added last (bitext mining, summarization, instruction
retrieval and reranking), for side-by-side checks.

Each helper builds an mteb task whose ``load_data`` turns embedscope's data into what mteb 2.26 expects;
:func:`support.mteb_reference_pairs.mteb_split_scores` runs ``mteb.evaluate`` on it. Where mteb
has the real task class (IFIR, InstructIR, FollowIR), it is subclassed so that its own
``task_specific_scores`` runs. Needs the optional dependency ``mteb``; nothing here is used by
embedscope's evaluation path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from support.mteb_reference import _GENERAL


def _metadata(name: str, task_type: str, main_score: str, eval_langs: Any = None):
    from mteb.abstasks.task_metadata import TaskMetadata

    general = dict(_GENERAL)
    if eval_langs is not None:
        general["eval_langs"] = eval_langs
    return TaskMetadata(
        type=task_type,
        name=name,
        main_score=main_score,
        dataset={"path": "local/" + name, "revision": "custom"},
        **general,
    )


def mteb_bitext_task(data: Any, *, name: str = "LocalBitextMining"):
    """An mteb ``AbsTaskBitextMining`` whose test split holds ``data`` (a ``BitextData``) as sentence1/sentence2."""
    from datasets import Dataset
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

    class _Task(AbsTaskBitextMining):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {
                "test": Dataset.from_dict({"sentence1": list(data.sentence1), "sentence2": list(data.sentence2)})
            }
            self.data_loaded = True

    _Task.metadata = _metadata(name, "BitextMining", "f1")
    return _Task()


def mteb_parallel_bitext_task(
    columns: Mapping[str, Sequence[str]], pairs: Mapping[str, list[str]], *, name: str = "LocalParallelBitextMining"
):
    """A *parallel* mteb bitext task: one column per language, subsets ``lang1-lang2`` (``pairs`` → languages)."""
    from datasets import Dataset
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

    class _Task(AbsTaskBitextMining):
        parallel_subsets = True

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {"test": Dataset.from_dict({k: list(v) for k, v in columns.items()})}
            self.data_loaded = True

    _Task.metadata = _metadata(name, "BitextMining", "f1", eval_langs=dict(pairs))
    return _Task()


def mteb_summarization_task(
    data: Any, *, name: str = "LocalSummarization", min_score: float = 0, max_score: float = 5, deprecated: bool = False
):
    """An mteb ``AbsTaskSummarization`` over a ``SummarizationData`` (``deprecated``: SummEval's old evaluator)."""
    from datasets import Dataset
    from mteb._evaluators.text.summarization_evaluator import DeprecatedSummarizationEvaluator
    from mteb.abstasks.text.summarization import AbsTaskSummarization

    class _Task(AbsTaskSummarization):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {
                "test": Dataset.from_dict(
                    {
                        "text": list(data.texts),
                        "human_summaries": [list(x) for x in data.human_summaries],
                        "machine_summaries": [list(x) for x in data.machine_summaries],
                        "relevance": [list(x) for x in data.relevance],
                    }
                )
            }
            self.data_loaded = True

    _Task.metadata = _metadata(name, "Summarization", "cosine_spearman")
    _Task.min_score, _Task.max_score = min_score, max_score
    if deprecated:
        _Task.evaluator = DeprecatedSummarizationEvaluator
    return _Task()


def _split_data(given: Any):
    """mteb's ``RetrievalSplitData`` for an embedscope ``InstructionData`` (instructions as a query column)."""
    from datasets import Dataset
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    data = given.data
    corpus = Dataset.from_dict(
        {"id": list(data.corpus.ids), "text": list(data.corpus.texts), "title": [""] * len(data.corpus)}
    )
    query_columns: dict[str, list[Any]] = {"id": list(data.queries.ids), "text": list(data.queries.texts)}
    if given.instructions:
        query_columns["instruction"] = [given.instructions[q] for q in data.queries.ids]
    candidates = getattr(data, "candidates", None)
    return RetrievalSplitData(
        queries=Dataset.from_dict(query_columns),
        corpus=corpus,
        relevant_docs={q: dict(d) for q, d in data.qrels.items()},
        top_ranked={q: list(c) for q, c in candidates.items()} if candidates else None,
    )


def mteb_followir_task(given: Any):
    """mteb's ``Core17InstructionRetrieval`` (FollowIR, p-MRR) over an ``InstructionData`` with candidates;
    its ``qrel_diff`` comes from ``given.changed_qrels`` instead of the hub."""
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.tasks.instruction_reranking.eng.core17_instruction_retrieval import Core17InstructionRetrieval

    class _Task(Core17InstructionRetrieval):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": _split_data(given)}}
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):  # type: ignore[override]
            changed = {q: list(d) for q, d in given.changed_qrels.items()}
            return evaluate_p_mrr_change(qrels, results, changed, self.k_values)

    return _Task()


def mteb_ifir_task(given: Any):
    """mteb's ``IFIRAila`` (level scores) over an ``InstructionData``."""
    from mteb.tasks.instruction_retrieval.eng.ifir_aila_retrieval import IFIRAila

    class _Task(IFIRAila):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": _split_data(given)}}
            self.data_loaded = True

    return _Task()


def mteb_instruct_ir_task(given: Any):
    """mteb's ``InstructIR`` (robustness@10) over an ``InstructionData``."""
    from mteb.tasks.instruction_retrieval.eng.instruct_ir import InstructIR

    class _Task(InstructIR):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": _split_data(given)}}
            self.data_loaded = True

    return _Task()


__all__ = [
    "mteb_bitext_task",
    "mteb_followir_task",
    "mteb_ifir_task",
    "mteb_instruct_ir_task",
    "mteb_parallel_bitext_task",
    "mteb_summarization_task",
]
