"""The Alembic script directory, installed as the data package `verity_migrations` (see setup.py;
`pipeline.store.upgrade_schema` runs it through `pipeline.package_data`)."""
