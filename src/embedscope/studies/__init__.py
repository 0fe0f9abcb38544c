"""Studies built on embedscope's parts: their own data, metrics and runs (``fastbook``)."""
