"""The deliveries a released run enqueues: one per configured target of its tenant whose rule
matches. Ids are derived from the run and the target's place in the list, so planning twice
gives the same ids (the store writes them once, with the release)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from models.delivery import NewDelivery
from pipeline.errors import ConfigurationError
from pipeline.rules.notify import notifies
from pipeline.sources.config import NotifyTarget, load_config

logger = logging.getLogger(__name__)


def tenant_targets(tenant_id: str) -> tuple[NotifyTarget, ...]:
    """The tenant's notification targets in the sources file, read now (a changed file counts
    from the next released run). A file that does not load has none: the run still ends, and
    the error is logged (the same file fails the run's data source in one line anyway)."""
    try:
        config = load_config()
    except ConfigurationError as exc:
        logger.error("notifications of tenant %s skipped: %s", tenant_id, exc)
        return ()
    tenant = config.tenants.get(tenant_id)
    return tenant.notify if tenant is not None else ()


def delivery_id(run_id: str, index: int) -> str:
    """The stable id of the run's delivery to its tenant's target number `index`."""
    return hashlib.sha256(f"{run_id}\n{index}".encode()).hexdigest()[:32]


def plan_deliveries(run_id: str, targets: Sequence[NotifyTarget], *, status: str,
                    verdict: str | None, origin: str) -> list[NewDelivery]:
    """The deliveries of a run released with `status` and `verdict`, made by `origin`."""
    return [
        NewDelivery(delivery_id=delivery_id(run_id, index), kind=target.type,
                    target=target.model_dump(mode="json"), max_attempts=target.max_attempts)
        for index, target in enumerate(targets)
        if notifies(target.when, status=status, verdict=verdict, origin=origin)
    ]
