"""Incident data as sources give it and tools read it, below both: the records
(`records`), what a source is asked and answers (`source`: the `DataSource` protocol, its
queries and `Fetched`), and the runbook index (`runbooks`). `pipeline.sources` implements
the protocol, `pipeline.tools` calls it; neither imports the other."""
