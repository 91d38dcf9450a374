"""The one whole-file writer (`hearth.atomic`): old or new, never half; modes; first wins; and
every file Hearth writes whole goes through it (a census with a planted control)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import hearth
from hearth import atomic
from hearth.atomic import TEMP_SUFFIX, write_atomically

SOURCE = Path(hearth.__file__).parent


def test_a_new_file_gets_its_mode_and_exactly_the_data(tmp_path: Path) -> None:
    target = tmp_path / "f"
    assert write_atomically(target, b"one", mode=0o640)
    assert target.read_bytes() == b"one" and target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["f"]  # no temporary file left


def test_keep_mode_keeps_an_existing_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    target.chmod(0o604)
    write_atomically(target, b"new", mode=0o600, keep_mode=True)
    assert target.read_bytes() == b"new" and target.stat().st_mode & 0o777 == 0o604


def test_first_wins_leaves_an_existing_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "token"
    assert write_atomically(target, b"first", first_wins=True)
    assert not write_atomically(target, b"second", first_wins=True)
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["token"]


def test_a_failed_write_keeps_the_old_file_whole(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails (the disk full at fsync) leaves the old content and no stray file."""
    target = tmp_path / "settings.json"
    target.write_bytes(b"old")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError):
        write_atomically(target, b"new" * 1000)
    assert target.read_bytes() == b"old"
    assert not any(p.name.endswith(TEMP_SUFFIX) for p in tmp_path.iterdir())


def test_it_never_writes_through_a_link_left_at_a_temporary_name(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"untouched")
    folder = tmp_path / "ws"
    folder.mkdir()
    for n in range(50):  # whatever name it picks is fresh (O_EXCL), not one of these
        os.symlink(elsewhere, folder / f".f.{n}{TEMP_SUFFIX}")
    write_atomically(folder / "f", b"data")
    assert elsewhere.read_bytes() == b"untouched"


def whole_file_writers(name: str, tree: ast.Module) -> list[str]:
    """Calls that put a whole file in place by hand (os.replace / os.rename / os.link)."""
    return [f"{name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("replace", "rename", "link")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "os"]


def test_detector_finds_a_planted_hand_made_atomic_write() -> None:
    planted = ast.parse("def save(p, t):\n    os.replace(t, p)\n")
    assert whole_file_writers("planted.py", planted) == ["planted.py:2"]


def test_every_whole_file_write_goes_through_the_one_writer() -> None:
    found = [hit for path in sorted(SOURCE.rglob("*.py")) if path.name != "atomic.py"
             for hit in whole_file_writers(str(path.relative_to(SOURCE)),
                                           ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []
