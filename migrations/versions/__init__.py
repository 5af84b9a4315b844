"""Alembic revisions (Alembic reads these files by path; it skips this one)."""
