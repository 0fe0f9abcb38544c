"""The fastbook study: multi-component QA retrieval over chunked documents (seed 001).

- :mod:`~embedscope.studies.fastbook.data`: the benchmark file (questions, answer components, contexts), its
  loader and statistics, keyword queries;
- :mod:`~embedscope.studies.fastbook.metrics`: Modified MRR@k and Modified Recall@k;
- :mod:`~embedscope.studies.fastbook.corpus`: relevant passages and the BEIR export;
- :mod:`~embedscope.studies.fastbook.run`: any retriever or pipeline over the passages, scored and written.

Documents → passages (including the study's ``fastbook-reference`` chunking) is generic and lives in
:mod:`embedscope.data.documents`.
"""
