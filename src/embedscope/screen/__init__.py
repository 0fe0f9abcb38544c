"""Screening: many candidates ranked on a fast path, the leaders confirmed exactly."""
