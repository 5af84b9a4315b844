"""The tree drawn in `pipeline/errors.py` is the real one: every VerityError subclass defined
anywhere in the packages appears in the drawing, under its real parent, and nothing else does."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import pipeline.errors
from pipeline.errors import VerityError

PACKAGES = ("models", "pipeline", "tasks", "cli", "api", "fake_anthropic")
_DRAWN = re.compile(r"^(?P<indent>[ │├└─]*?)(?:[├└]── )?(?P<name>[A-Z]\w*(?:Error|Failure))\b")
_MARK = re.compile(r"\[(?P<module>[\w.]+)\]")


def drawn_tree(doc: str) -> dict[str, tuple[str | None, str | None]]:
    """Each drawn class -> (its parent in the drawing, the module a `[module]` mark names)."""
    drawing = doc.split("\n\n")[1]
    tree: dict[str, tuple[str | None, str | None]] = {}
    parents: list[tuple[int, str]] = []
    for line in drawing.splitlines():
        match = _DRAWN.match(line.strip("\n")[4:])
        if match is None:
            continue
        depth = len(match.group("indent")) + (4 if "──" in line else 0)
        while parents and parents[-1][0] >= depth:
            parents.pop()
        mark = _MARK.search(line)
        tree[match.group("name")] = (parents[-1][1] if parents else None,
                                     mark.group("module") if mark else None)
        parents.append((depth, match.group("name")))
    return tree


def real_tree() -> dict[str, tuple[str | None, str]]:
    """Each VerityError subclass of the packages -> (its parent, its module)."""
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            importlib.import_module(info.name)
    tree: dict[str, tuple[str | None, str]] = {"VerityError": (None, "pipeline.errors")}
    pending = [VerityError]
    while pending:
        parent = pending.pop()
        for cls in parent.__subclasses__():
            if cls.__module__.split(".")[0] in PACKAGES:
                tree[cls.__name__] = (parent.__name__, cls.__module__)
            pending.append(cls)
    return tree


def test_errors__the_drawing_is_parsed() -> None:
    doc = "Title.\n\n    Base\n    ├── AError    a\n    │   └── BError  [x.y]\n    └── CError\n"
    tree = drawn_tree(doc.replace("Base", "VerityError"))
    assert tree == {"VerityError": (None, None), "AError": ("VerityError", None),
                    "BError": ("AError", "x.y"), "CError": ("VerityError", None)}


def test_errors__every_verity_error_is_drawn_under_its_real_parent() -> None:
    drawn = drawn_tree(pipeline.errors.__doc__ or "")
    real = real_tree()
    assert {name: parent for name, (parent, _) in drawn.items()} \
        == {name: parent for name, (parent, _) in real.items()}


def test_errors__a_class_defined_elsewhere_is_marked_with_its_module() -> None:
    drawn = drawn_tree(pipeline.errors.__doc__ or "")
    for name, (_, module) in real_tree().items():
        assert drawn[name][1] == (None if module == "pipeline.errors" else module), name


@pytest.mark.parametrize("name", sorted(n for n in dir(pipeline.errors) if n.endswith("Error")))
def test_errors__every_class_of_the_module_is_drawn(name: str) -> None:
    assert name in drawn_tree(pipeline.errors.__doc__ or "")
