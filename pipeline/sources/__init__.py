"""Data sources: where tools' queries go (a scenario folder, or Prometheus, Alertmanager, Loki,
Kubernetes and a runbook folder named in the sources file). What a source answers is declared
in `pipeline.data.source`; its errors in `pipeline.errors`."""
