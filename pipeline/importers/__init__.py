"""Other agents' runs, made into Verity run bundles: an Anthropic Messages transcript, an
OpenAI Chat Completions transcript, an OpenTelemetry GenAI trace (OTLP JSON), or plain files
(an answer and its evidence). Each importer reads its format into an `ImportedRun`; `to_bundle`
turns that into invocations whose projections paths can address, claims split from the
answer's prose, and the bindings the deterministic binder finds for them."""
