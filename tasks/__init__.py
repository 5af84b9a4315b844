"""Celery wiring only: the app, the coordinator, one thin task per node, the tool chord."""
