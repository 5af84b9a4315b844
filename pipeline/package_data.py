"""The data Verity ships inside its packages, reached through `importlib.resources`.

Three sets of files travel with the code: the prompts (`pipeline/prompt_files`), the sample
incidents and the Alembic migrations. The last two stay at the repository's top level, where
people and the scenario generator expect them, and `setup.py` ships those folders as the data
packages `verity_scenarios` (`scenarios/`) and `verity_migrations` (`migrations/`). In a
checkout (an editable install) they resolve to those folders; in an installed wheel, to
site-packages. Nothing finds its data by walking up from `__file__`.
"""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from functools import cache
from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path

SCENARIOS_PACKAGE = "verity_scenarios"
"""The shipped scenario folders (the repository's `scenarios/`)."""
MIGRATIONS_PACKAGE = "verity_migrations"
"""The Alembic script directory (the repository's `migrations/`)."""

_EXTRACTED = ExitStack()
atexit.register(_EXTRACTED.close)


def package_files(package: str) -> Traversable:
    """The files of `package`, for reading (works for zipped packages too)."""
    return files(package)


@cache
def package_folder(package: str) -> Path:
    """The folder of `package` on the file system, extracted once for the life of the process
    if the package is not already plain files. Scenario folders travel to workers as paths and
    Alembic reads a script directory, so both need real files."""
    return _EXTRACTED.enter_context(as_file(files(package)))
