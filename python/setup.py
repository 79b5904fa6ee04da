"""Build the devpool wheel: the C ABI library from crates/devpool-ffi, built by cargo in
release mode and placed in the package as devpool/_devpool_ffi*.so, plus the C header
the PyTorch extension compiles against."""

import os
import shutil

from setuptools import setup
from setuptools_rust import Binding, RustExtension

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.join(HERE, "..", "crates", "devpool-ffi")

# The header travels inside the package: devpool.torch compiles against it.
header_src = os.path.join(CRATE, "include", "devpool.h")
header_dst = os.path.join(HERE, "devpool", "include", "devpool.h")
if os.path.exists(header_src):
    os.makedirs(os.path.dirname(header_dst), exist_ok=True)
    shutil.copyfile(header_src, header_dst)
elif not os.path.exists(header_dst):
    raise SystemExit(
        "devpool: build from a checkout of the devpool repository (pip install ./python): "
        f"{header_src} is missing"
    )

setup(
    rust_extensions=[
        RustExtension(
            "devpool._devpool_ffi",
            path=os.path.join(CRATE, "Cargo.toml"),
            binding=Binding.NoBinding,
            py_limited_api=True,
            debug=False,
        )
    ],
    zip_safe=False,
)
