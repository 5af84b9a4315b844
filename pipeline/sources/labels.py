"""Which service a label set belongs to, by the labels people actually use.

A configured `service_label` says where a source keeps the service's name, but series and
alerts from other exporters rarely carry it: node-exporter's `up` has only `job` and
`instance`, a Kubernetes pod's series `app.kubernetes.io/name` or `app`. `target_name` looks
in the configured label first, then in the community conventions (`SERVICE_LABELS`), then
names the target by its `instance`; a series or alert is never "unknown" while it has any of
them.

    target_name({"job": "node-exporter", "instance": "h:9100"}, "service")  # "node-exporter"
    target_name({"instance": "h:9100"}, "service")                          # 'instance="h:9100"'
"""

from __future__ import annotations

from collections.abc import Mapping

SERVICE_LABELS = ("service", "app.kubernetes.io/name", "app", "k8s_app", "deployment",
                  "container", "job")
"""Labels that name a service, most specific first: `job` (the scrape job) comes last
because it often names a whole class of targets (`kubernetes-pods`)."""


def target_name(labels: Mapping[str, str], service_label: str) -> str | None:
    """The service a label set belongs to: its `service_label`, else the first of
    `SERVICE_LABELS` it has, else `instance="..."`; None when it has none of them."""
    for key in (service_label, *SERVICE_LABELS):
        if labels.get(key):
            return labels[key]
    if labels.get("instance"):
        return f'instance="{labels["instance"]}"'
    return None


__all__ = ["SERVICE_LABELS", "target_name"]
