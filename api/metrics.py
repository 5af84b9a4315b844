"""`GET /metrics`: Verity's own Prometheus metrics (`pipeline.telemetry.metrics`), and the
depth of each broker queue read when scraped.

With `PROMETHEUS_MULTIPROC_DIR` shared by the API and the workers of a machine, the page holds
every process's samples. It asks for an API token like every other endpoint unless
`VERITY_API_METRICS_PUBLIC` is true (a scraper on a private network): the counters carry no
tenant id unless `VERITY_METRICS_TENANTS` opts tenants in, but they count every tenant's runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.deps import Authenticated
from pipeline.run.graph import WORKER_QUEUES
from pipeline.telemetry.metrics import exposition, queue_depth_collector

_LOG = logging.getLogger(__name__)


def queue_depths(broker_url: str | None) -> Callable[[], dict[str, float]]:
    """A reader of the messages waiting in each worker queue (a Redis broker's list lengths);
    it reads nothing for another broker, and an unreachable broker reads as no samples."""
    if not broker_url or not broker_url.startswith(("redis://", "rediss://")):
        return dict
    client = redis.Redis.from_url(broker_url, socket_timeout=1.0, socket_connect_timeout=1.0)

    def read() -> dict[str, float]:
        try:
            with client.pipeline(transaction=False) as pipe:
                for queue in WORKER_QUEUES:
                    pipe.llen(queue)
                lengths = pipe.execute()
        except redis.RedisError as exc:
            _LOG.warning("queue depths not read: %s", exc)
            return {}
        return {queue: float(n) for queue, n in zip(WORKER_QUEUES, lengths, strict=True)}

    return read


def metrics_router(*, public: bool, broker_url: str | None) -> APIRouter:
    """The `/metrics` route: authenticated unless `public`."""
    router = APIRouter() if public else APIRouter(route_class=Authenticated)
    depths = queue_depth_collector(queue_depths(broker_url))

    @router.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """The Prometheus text page of every Verity process sharing this machine's
        multiprocess directory (or of this process alone)."""
        body, content_type = await run_in_threadpool(exposition, [depths])
        return Response(body, media_type=content_type)

    return router
