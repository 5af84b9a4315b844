"""Which released runs notify a target: a pure function of the target's `when` and the run's
outcome and origin (the sources file's `[tenants."<id>"].notify[].when`)."""

from __future__ import annotations

from collections.abc import Sequence

ALERT_ORIGIN = "alert"
"""The origin (`RunRecord.origin`) of a run an alert started."""


def notifies(when: str | Sequence[str], *, status: str, verdict: str | None,
             origin: str) -> bool:
    """Whether a run released with `status` (SUCCESS or FALLBACK) and `verdict`, made by
    `origin`, goes to a target whose rule is `when`: "always"; "alert" (runs an alert
    started); or a list of verdicts (PASS, LOW_CONFID, REJECT) and FALLBACK, any of which
    matches. A fallback matches FALLBACK, never a verdict."""
    if isinstance(when, str):
        return when == "always" or (when == ALERT_ORIGIN and origin == ALERT_ORIGIN)
    if status == "FALLBACK":
        return "FALLBACK" in when
    return verdict is not None and verdict in when
