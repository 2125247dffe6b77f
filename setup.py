"""Build the optional Cython gate.

LENS_BUILD_EXT: unset = try, and warn loudly if the build fails; "1" = a failed build
fails the install (CI); "0" = skip the extension (pure-Python gate only).
"""
import os

from setuptools import Extension, setup

mode = os.environ.get("LENS_BUILD_EXT", "").strip()
if mode not in ("", "0", "1"):
    raise SystemExit(f"LENS_BUILD_EXT={mode!r}: allowed values are unset, '0' or '1'")

ext_modules = []
if mode != "0":
    try:
        from Cython.Build import cythonize
    except ImportError:
        if mode == "1":
            raise
        print("WARNING: Cython is not installed; lens_core will use its pure-Python gate")
    else:
        ext = Extension("lens_core._gate", ["lens_core/_gate.pyx"], optional=mode != "1")
        ext_modules = cythonize([ext], language_level=3, quiet=True)

setup(ext_modules=ext_modules)
