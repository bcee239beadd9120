"""Logging: plain lines to stderr (journald adds its own timestamps) and optionally a file."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def setup_logging(level: str = "info", log_file: Path | None = None) -> None:
    root = logging.getLogger()
    root.setLevel(level.upper())
    for handler in list(root.handlers):
        root.removeHandler(handler)
    under_journal = bool(os.environ.get("JOURNAL_STREAM"))
    stream_fmt = (
        "%(levelname)s %(name)s: %(message)s"
        if under_journal
        else ("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter(stream_fmt))
    root.addHandler(stderr)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
