"""Build the optional Cython gate (lens_core/_gate.pyx).

LENS_BUILD_EXT: unset = try, and warn loudly if the build fails (lens_core then runs on
its pure-Python gate); "1" = a failed build fails the install (CI); "0" = skip it.
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODE = os.environ.get("LENS_BUILD_EXT", "").strip()
if MODE not in ("", "0", "1"):
    sys.exit(f"LENS_BUILD_EXT={MODE!r}: allowed values are unset, '0' (skip) or '1' (required)")


class BuildGate(build_ext):
    """build_ext that turns an optional build failure into a visible warning."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/Cython failure
            if MODE == "1":
                raise
            print(f"WARNING: lens_core's compiled gate was not built ({exc}); "
                  "the pure-Python gate will be used (lens_core.IMPLEMENTATION == 'python')",
                  file=sys.stderr)


ext_modules = []
if MODE != "0":
    try:
        from Cython.Build import cythonize

        ext_modules = cythonize([Extension("lens_core._gate", ["lens_core/_gate.pyx"])],
                                language_level=3, quiet=True)
    except Exception as exc:  # noqa: BLE001 - Cython missing, or the .pyx failed to compile
        if MODE == "1":
            raise
        print(f"WARNING: lens_core's gate was not cythonized ({exc!r}); "
              "the pure-Python gate will be used", file=sys.stderr)

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildGate})
