"""The Celery application; its settings come from `celeryconfig`."""

from __future__ import annotations

from celery import Celery

app = Celery("verity", include=["tasks.nodes"])
app.config_from_object("celeryconfig")
