"""Sweeps: a grid of settings (shared axes x sub-grids) run point by point, its report, HTML page and manifest."""
