"""The package itself: its version is the workspace's, the README shows the
example mypy checks, and Retry-After is read as RFC 9110 writes it."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from compactor_client import VERSION, __version__
from compactor_client._retry import parse_retry_after

HERE = Path(__file__).resolve().parent


def test_the_package_takes_the_workspace_version() -> None:
    cargo = (HERE.parents[2] / "Cargo.toml").read_text(encoding="utf-8")
    workspace = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"', cargo)
    pyproject = (HERE.parent / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert workspace and declared
    assert declared.group(1) == workspace.group(1) == VERSION == __version__


def test_the_readme_shows_the_example_mypy_checks() -> None:
    readme = (HERE.parent / "README.md").read_text(encoding="utf-8")
    shown = re.search(r"```python\n(.*?)```", readme, re.S)
    assert shown is not None
    assert shown.group(1) == (HERE / "readme_example.py").read_text(encoding="utf-8")


def test_retry_after_reads_delta_seconds_and_http_dates_and_nothing_else() -> None:
    now = datetime(2026, 12, 6, 8, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("2", now) == 2.0
    assert parse_retry_after(" 0 ", now) == 0.0
    assert parse_retry_after("Sun, 06 Dec 2026 08:00:05 GMT", now) == 5.0
    assert parse_retry_after("Sun, 06 Dec 2026 07:59:00 GMT", now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("-1", now) is None
    assert parse_retry_after(None, now) is None
