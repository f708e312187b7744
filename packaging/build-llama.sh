#!/bin/sh
# The llama-cpp-python wheel drag-assistant installs: compiled here once, portable.
#
#   packaging/build-llama.sh            prints the wheel's path (building it if needed)
#
# Portable: llama.cpp is compiled without -march=native (GGML_NATIVE=OFF), and its CPU
# backend as one library per CPU level (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS: x64,
# sse42, sandybridge, haswell, skylakex, icelake, zen4, sapphirerapids, ...), installed
# beside libllama.so (CMAKE_INSTALL_BINDIR).  At load, drag-assistant checks the best
# variant for this CPU in a child process and loads it (assistant/models/llamabuild.py).  So the
# same wheel runs on any x86-64 CPU, and on the one it was built on no slower than a
# native build (models/README.md: Builds).
#
# CMAKE_ARGS adds to these flags (a GPU: CMAKE_ARGS=-DGGML_CUDA=on) and cannot undo one
# (-DGGML_NATIVE=ON left in a shell's CMAKE_ARGS would crash on other CPUs): they come
# after it, and CMake takes the last value of each.  The wheel is kept in
# DRAG_WHEELS (default ~/.cache/drag-assistant/wheels) under a key of the version, the
# flags and the compiler, never in pip's cache, which keys a built wheel on its source
# alone and would hand a native build back after the flags changed.
set -eu
version=${LLAMA_CPP_VERSION:-0.3.36}
python=${PYTHON:-python3}
portable="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DLLAVA_BUILD=OFF"
# The portable flags last (CMake takes the last value of each); with no CMAKE_ARGS the
# same string as before, so that a wheel kept under its key is found again.
if [ -n "${CMAKE_ARGS:-}" ]; then flags="$CMAKE_ARGS $portable"; else flags="$portable "; fi
# Compiler options without the machine ones (-m...).
portable_only() {
    kept=""
    for option in "$@"; do
        case "$option" in -m*) ;; *) kept="$kept $option" ;; esac
    done
    printf '%s' "${kept# }"
}
compiler=$( (${CC:-cc} --version 2>/dev/null || echo none) | head -n 1)
if command -v sha256sum >/dev/null; then sum="sha256sum"; else sum="shasum -a 256"; fi
key=$(printf '%s\n' "$version" "$flags" "$compiler" "$(uname -m)" | $sum | cut -c1-16)
store="${DRAG_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/drag-assistant/wheels}/llama-$key"

found=$(ls "$store"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$found" ]; then
    echo "compiling llama-cpp-python $version, portable (once; about 15 minutes on 2 cores)…" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # CMake adds CFLAGS and CXXFLAGS to every file it compiles: a machine option left
    # there (-march=native, -mavx2) would make the shared code native; the rest passes.
    CFLAGS=$(portable_only ${CFLAGS:-}) CXXFLAGS=$(portable_only ${CXXFLAGS:-}) \
    CMAKE_ARGS="$flags" "$python" -m pip wheel --quiet --no-deps --no-cache-dir \
        --no-binary llama-cpp-python --wheel-dir "$tmp" "llama-cpp-python==$version" >&2
    wheel=$(ls "$tmp"/llama_cpp_python-*.whl)
    # A build for every CPU carries its CPU variants; without them llama.cpp has no CPU
    # backend at all (this is what a missing CMAKE_INSTALL_BINDIR gave).
    if ! "$python" -m zipfile -l "$wheel" | grep -q 'llama_cpp/lib/libggml-cpu-'; then
        echo "build-llama: $wheel has no CPU variant libraries" >&2
        exit 1
    fi
    mkdir -p "$store"
    printf '%s\n' "$flags" > "$store/CMAKE_ARGS"
    # Whole or not at all: another build-llama.sh may look meanwhile.
    cp "$wheel" "$store/.partial"
    mv "$store/.partial" "$store/$(basename "$wheel")"
    found=$(ls "$store"/llama_cpp_python-*.whl | head -n 1)
fi
echo "$found"
