"""``embedscope serve``: a read-only web app over a results store (``app.py``: the FastAPI app and its routes;
``charts.py``: inline SVG charts; ``templates/``: the pages, Jinja2, autoescaped). Its queries are
:mod:`embedscope.history.queries`."""
