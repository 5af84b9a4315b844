"""Packaging that pyproject.toml cannot say: two data folders stay at the repository's top level
(`scenarios/` for people and `scenarios/generate.py`, `migrations/` for `alembic` and
`alembic.ini`) and ship as the packages `verity_scenarios` and `verity_migrations`, read through
importlib.resources (pipeline/package_data.py). Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

CODE = ["models*", "pipeline*", "tasks*", "client*", "cli*", "api*", "fake_anthropic*"]
DATA = {"verity_scenarios": "scenarios", "verity_migrations": "migrations"}

setup(
    packages=[*find_namespace_packages(include=CODE), *DATA, "verity_migrations.versions"],
    package_dir=DATA,
)
