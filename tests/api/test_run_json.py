"""A run's JSON (what `GET /runs/{id}` and `GET /runs` answer) keeps the names it had before
`source` came to mean a data source: `source` is run or verify, `data_source` the source
reference; the HTTP client reads it back into the same record."""

from __future__ import annotations

import json

from models.common import Intent, RunStatus
from models.run import RunRecord

RECORD = RunRecord(run_id="r1", tenant_id="t", query="q", intent=Intent.DIAGNOSIS,
                   status=RunStatus.SUCCESS, version=3, origin="verify",
                   origin_run_id="r0", source="prod@2026-12-01T17:00:00Z")


def test_the_json_keeps_its_names() -> None:
    wire = json.loads(RECORD.model_dump_json())
    assert (wire["source"], wire["source_run_id"], wire["data_source"]) == (
        "verify", "r0", "prod@2026-12-01T17:00:00Z")
    assert "origin" not in wire and "origin_run_id" not in wire


def test_the_json_reads_back_into_the_same_record() -> None:
    assert RunRecord.model_validate_json(RECORD.model_dump_json()) == RECORD
    assert RunRecord.model_validate(RECORD.model_dump(mode="json")) == RECORD
