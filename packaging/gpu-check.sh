#!/bin/bash
# The student on a GPU build, on a machine lent for minutes with no network: builds the
# portable wheel with CUDA (packaging/build-llama.sh), then tools/gpu_check.py times a
# model of the student's layout on the GPU against the CPU.  Prepared here, beforehand:
#
#   mkdir -p .gpu-check/wheels && cd .gpu-check/wheels &&
#     pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 &&
#     pip download --no-deps --only-binary :all: --python-version 3.12 \
#       scikit-build-core packaging pathspec diskcache platformdirs
#   python tools/gpu_check.py skeleton <the student's .gguf> .gpu-check/model
#
# (the sdist is 76 MB: its .git folder, docs/ops and models/*.gguf can be left out to fit
# a 64 MB transfer).  GPU_CHECK_CXX: the C++ compiler, where the default one links the
# C++ runtime statically (models/README.md, GPUs).  Writes its files under $OUT.
set -u -o pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-.gpu-check/out}
mkdir -p "$OUT"
start=$(date +%s)
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
if tools=$(python3 -c "import cmake,ninja,os;print(os.path.dirname(cmake.__file__)+'/data/bin:'+ninja.BIN_DIR)" 2>/dev/null); then
    export PATH=$tools:$PATH  # the binaries: pip's wrapper scripts fail in a build environment
fi
if [ -n "${GPU_CHECK_CXX:-}" ]; then
    # nvcc's host compiler too; the C compiler beside it unless GPU_CHECK_CC names one
    export CXX=$GPU_CHECK_CXX CUDAHOSTCXX=$GPU_CHECK_CXX
    export CC=${GPU_CHECK_CC:-$(echo "$GPU_CHECK_CXX" | sed 's/g++$/gcc/; s/clang++$/clang/')}
fi
{ nvcc --version | tail -2; cmake --version | head -1; ${CXX:-c++} --version | head -1; nvidia-smi -L; nproc; } 2>&1 | tee "$OUT/machine.txt"
python3 tools/gpu_check.py random .gpu-check/model /tmp/student-layout.gguf &
random=$!
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.gpu-check/wheels DRAG_WHEELS=/tmp/drag-wheels-$(echo "${CXX:-c++}" | tr -c "a-z0-9\n" _) PYTHON=python3
export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=${GPU_CHECK_ARCH:-90-real} -DGGML_CUDA_FA=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
if ! timeout "${GPU_CHECK_BUILD_SECONDS:-420}" sh packaging/build-llama.sh > /tmp/wheel.txt 2> "$OUT/build.log"; then
    echo "the build failed after $(( $(date +%s) - start )) s"; tail -c 3000 "$OUT/build.log"; exit 1
fi
echo "built in $(( $(date +%s) - start )) s"
wheel=$(cat /tmp/wheel.txt)
rm -rf /tmp/site /tmp/drag-home  # a rerun on a warm machine tests this build, checked anew
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheel" \
    .gpu-check/wheels/diskcache-*.whl .gpu-check/wheels/platformdirs-*.whl || exit 1
lib=/tmp/site/llama_cpp/lib
for f in "$lib"/libllama.so "$lib"/libggml.so.0 "$lib"/libggml-cuda.so; do
    printf '%s needs: %s\n' "$(basename "$f")" "$(readelf -d "$f" | grep -o 'NEEDED.*' | grep -o '\[.*\]' | tr '\n' ' ')"
done | tee "$OUT/libraries.txt"
wait $random || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/bench DRAG_HOME=/tmp/drag-home
for gpu in auto off; do  # each in a process of its own (tools/gpu_check.py)
    timeout "${GPU_CHECK_SECONDS:-150}" python3 tools/gpu_check.py check /tmp/student-layout.gguf \
        $gpu 3 128 2>&1 | tee "$OUT/check-$gpu.txt" || { echo "the $gpu check failed"; failed=1; }
done
[ -z "${failed:-}" ] && python3 tools/gpu_check.py ratio "$OUT/check-auto.txt" "$OUT/check-off.txt"
cp /tmp/drag-home/cache/llama-probe-*.log "$OUT/" 2>/dev/null
echo "done in $(( $(date +%s) - start )) s"
[ -z "${failed:-}" ]
