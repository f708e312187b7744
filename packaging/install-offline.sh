#!/bin/sh
# Installs drag-assistant from this folder alone: no package index, no network.
#
#   sh install.sh [VENV]       VENV default: ~/.local/share/drag-assistant/venv
#
# Needs the same Python version and platform the wheelhouse was made with (PYTHON=...,
# default python3).  Then: VENV/bin/drag doctor, and VENV/bin/drag to start.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-"$HOME/.local/share/drag-assistant/venv"}
python=${PYTHON:-python3}
extras=$(cat "$here/EXTRAS")
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-index --find-links "$here" \
    "drag-assistant[$extras]"
"$venv/bin/python" -m pip install --quiet --no-index --find-links "$here" --no-deps \
    -r "$here/no-deps.txt"
echo "installed: $venv/bin/drag (check it with: $venv/bin/drag doctor)"
