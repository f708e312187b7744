"""Where drag-assistant keeps its files.

``DRAG_HOME`` roots everything in one folder (tests, portable installs);
otherwise the platform's directories are used (platformdirs).
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import PlatformDirs

APP = "drag-assistant"


def _home() -> Path | None:
    value = os.environ.get("DRAG_HOME")
    return Path(value).expanduser() if value else None


def _dirs() -> PlatformDirs:
    return PlatformDirs(APP, appauthor=False)


def config_dir() -> Path:
    home = _home()
    return home / "config" if home else Path(_dirs().user_config_dir)


def data_dir() -> Path:
    home = _home()
    return home / "data" if home else Path(_dirs().user_data_dir)


def cache_dir() -> Path:
    home = _home()
    return home / "cache" if home else Path(_dirs().user_cache_dir)


def state_dir() -> Path:
    home = _home()
    return home / "state" if home else Path(_dirs().user_state_dir)


def config_file() -> Path:
    explicit = os.environ.get("DRAG_CONFIG")
    return Path(explicit).expanduser() if explicit else config_dir() / "config.toml"


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) readable by the owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
