"""Metrics: pure functions from rankings (or predictions) and judgments to scores."""

from embedscope.metrics.ranking import DEFAULT_K_VALUES, RankingScores, evaluate_ranking

__all__ = ["DEFAULT_K_VALUES", "RankingScores", "evaluate_ranking"]
