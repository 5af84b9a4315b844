"""Celery wiring only: the app, the coordinator, one thin task per node, the tool chord, and
what a producer sends (`producer.py`; the producer API itself is `client/`)."""
