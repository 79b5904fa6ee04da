"""Compiling devpool's PyTorch allocator (csrc/devpool_torch.cpp) against the PyTorch
installed here, once, into a cache directory; later imports load the cached build.

It needs a C++ compiler, ninja, PyTorch's headers (shipped with PyTorch) and the CUDA
runtime headers: from CUDA_HOME or /usr/local/cuda, or from NVIDIA's pip wheels that a
CUDA build of PyTorch installs (nvidia/cu13/include or nvidia/cuda_runtime/include).
A missing piece is named in the error.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import sys
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))
CACHE_ENV = "DEVPOOL_CACHE"


class BuildError(RuntimeError):
    """The PyTorch extension could not be built here; the message says what is missing."""


def source_path() -> str:
    return os.path.join(_HERE, "csrc", "devpool_torch.cpp")


def header_dir() -> str:
    """The directory of devpool.h: inside the installed package, or in the checkout."""
    inside = os.path.join(_HERE, "include")
    if os.path.exists(os.path.join(inside, "devpool.h")):
        return inside
    repo = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "crates", "devpool-ffi", "include")
    if os.path.exists(os.path.join(repo, "devpool.h")):
        return repo
    raise BuildError("devpool.h was not found in the package nor in a devpool checkout")


def _site_dirs() -> list[str]:
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    dirs += [p for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(d for d in dirs if d and os.path.isdir(d)))


def cuda_include_dirs() -> list[str]:
    """Directories that together hold cuda_runtime_api.h and crt/host_config.h."""
    roots = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            roots.append(os.path.join(os.environ[var], "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include"))
    roots.append("/usr/local/cuda/include")
    for site in _site_dirs():
        roots += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "include")))
        roots += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "include")))
        roots += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_nvcc", "include")))
    roots = [r for r in dict.fromkeys(roots) if os.path.isdir(r)]
    api = [r for r in roots if os.path.exists(os.path.join(r, "cuda_runtime_api.h"))]
    if not api:
        raise BuildError(
            "the CUDA runtime headers (cuda_runtime_api.h) were not found: install the CUDA "
            "toolkit and set CUDA_HOME, or `pip install nvidia-cuda-runtime` matching your "
            f"PyTorch's CUDA version (looked in: {', '.join(roots) or 'nowhere'})"
        )
    out = api[:1]
    if not os.path.exists(os.path.join(api[0], "crt", "host_config.h")):
        crt = [r for r in roots if os.path.exists(os.path.join(r, "crt", "host_config.h"))]
        if not crt:
            raise BuildError(
                "the CUDA headers crt/host_config.h were not found beside "
                f"{api[0]}: install the CUDA toolkit, or `pip install nvidia-cuda-crt` "
                "matching your PyTorch's CUDA version"
            )
        out.append(crt[0])
    return out


def _compiler() -> str:
    cxx = os.environ.get("CXX", "c++")
    path = shutil.which(cxx) or shutil.which("g++")
    if not path:
        raise BuildError(
            f"no C++ compiler found ({cxx!r} or g++ on PATH): install one (e.g. the "
            "build-essential package) or set CXX"
        )
    return path


def cache_dir(torch_version: str) -> str:
    """The build directory for this PyTorch version and this source: a change of
    either builds anew."""
    with open(source_path(), "rb") as f:
        digest = hashlib.sha256(f.read())
    with open(os.path.join(header_dir(), "devpool.h"), "rb") as f:
        digest.update(f.read())
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "devpool"
    )
    tag = f"torch-{torch_version}-py{sys.version_info[0]}{sys.version_info[1]}-{digest.hexdigest()[:12]}"
    return os.path.join(base, tag.replace("+", "_"))


def build_extension(verbose: bool = False):
    """The compiled extension module, built now if this PyTorch has no cached build."""
    import torch
    from torch.utils import cpp_extension

    _compiler()
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError:
        raise BuildError(
            "ninja is needed to build devpool's PyTorch extension: `pip install ninja`"
        ) from None
    includes = [header_dir()] + cuda_include_dirs()
    build_dir = cache_dir(torch.__version__)
    os.makedirs(build_dir, exist_ok=True)
    name = "devpool_torch_ext"
    built = glob.glob(os.path.join(build_dir, name + "*.so"))
    if not built:
        print(
            f"devpool: compiling the PyTorch allocator for torch {torch.__version__} "
            f"(once; cached in {build_dir})...",
            file=sys.stderr,
            flush=True,
        )
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    try:
        return cpp_extension.load(
            name=name,
            sources=[source_path()],
            extra_include_paths=includes,
            extra_cflags=["-O2", "-std=c++17"],
            extra_ldflags=[f"-L{torch_lib}", "-lc10_cuda", "-ldl"],
            build_directory=build_dir,
            verbose=verbose,
        )
    except Exception as e:  # noqa: BLE001 - compiler output is in the message
        raise BuildError(f"building devpool's PyTorch extension failed: {e}") from e
