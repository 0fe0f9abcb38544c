"""Other tools' config schemas, read as embedscope evaluation calls (``evalscope``: EvalScope's eval_config)."""
