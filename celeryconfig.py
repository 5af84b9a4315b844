"""Celery settings, read from the environment (VERITY_*), nothing else.

Without VERITY_BROKER_URL the embedded default applies: an in-process worker on `memory://`
with the `cache+memory://` result backend.
"""

from __future__ import annotations

import os

broker_url = os.environ.get("VERITY_BROKER_URL", "memory://")
result_backend = os.environ.get("VERITY_RESULT_BACKEND", "cache+memory://")
task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
worker_send_task_events = True
task_send_sent_event = True
task_track_started = True
task_default_queue = "control"
timezone = "UTC"
enable_utc = True
# The memory transport polls every second by default; every hop would wait for it.
broker_transport_options = {"polling_interval": 0.01} if broker_url.startswith("memory") else {}
