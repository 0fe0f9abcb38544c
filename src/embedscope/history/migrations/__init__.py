"""The store schema's Alembic revisions (``versions/``), applied by :func:`embedscope.history.store.upgrade`."""
