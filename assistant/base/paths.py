"""Where drag-assistant keeps its files.

``DRAG_HOME`` roots everything in one folder (tests, portable installs);
otherwise the platform's directories are used (platformdirs).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

from platformdirs import PlatformDirs

from assistant.base.errors import InputError

APP = "drag-assistant"


def expand(value: str | os.PathLike[str]) -> Path:
    """``value`` with a leading ``~`` or ``~user`` made that home folder; a user this
    system knows no home for is an InputError naming it (pathlib raises RuntimeError)."""
    path = Path(value)
    try:
        return path.expanduser()
    except RuntimeError:
        raise InputError(f"{str(value)!r}: no home folder is known for {path.parts[0]}") from None


def _home() -> Path | None:
    value = os.environ.get("DRAG_HOME")
    home = expand(value) if value else None
    if home is not None and home.exists() and not home.is_dir():
        raise InputError(f"DRAG_HOME {str(home)!r} is not a folder")
    return home


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


def prefix_states() -> Path:
    """Where the models' read prompt heads are kept (:mod:`assistant.models.prefixstate`)."""
    return cache_dir() / "prefix-state"


def state_dir() -> Path:
    home = _home()
    return home / "state" if home else Path(_dirs().user_state_dir)


def config_file() -> Path:
    explicit = os.environ.get("DRAG_CONFIG")
    return expand(explicit) if explicit else config_dir() / "config.toml"


def private_dir(path: Path) -> Path:
    """Create ``path`` and each missing parent readable by the owner only (0700; a parent
    that exists already is left as it is)."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        folder.chmod(0o700)  # mkdir's mode is cut by the umask
    return path


def open_private(path: Path, *, make_folder: bool = True) -> BinaryIO:
    """``path`` opened for writing (truncated), readable by the owner only (0600) whatever
    the umask; its folder is made with :func:`private_dir` (``make_folder``; a file the
    user named goes into a folder that is there)."""
    if make_folder:
        private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if stat.S_ISREG(os.fstat(fd).st_mode):  # not a device named (/dev/stdout, /dev/null)
        os.fchmod(fd, 0o600)  # an existing file keeps its mode on open
    return os.fdopen(fd, "wb")


def write_private(path: Path, text: str | bytes, *, make_folder: bool = True) -> Path:
    """Write ``path`` readable by the owner only (0600), replacing it."""
    with open_private(path, make_folder=make_folder) as fh:
        fh.write(text.encode("utf-8") if isinstance(text, str) else text)
    return path
