"""Build the optional compiled modules: lens_core's gate and native wing (recorder, encoders), and the report's reader.

LENS_BUILD_EXT: unset = try, and if the build fails install the pure-Python twins and say so
(on stderr here, and on stderr at the first `import lens_core`, since pip hides build output
without -v); "1" = a failed build fails the install (CI); "0" = skip it (pure Python, silently).
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODE = os.environ.get("LENS_BUILD_EXT", "").strip()
if MODE not in ("", "0", "1"):
    sys.exit(f"LENS_BUILD_EXT={MODE!r}: allowed values are unset, '0' (skip) or '1' (required)")

# Written into the built package when an attempted build failed: lens_core reads it at import.
FAILED_MARK = os.path.join("lens_core", "_native", "BUILD_FAILED")
MODULES = {
    "lens_core._gate": "lens_core/_gate.pyx",
    "lens_core._native._recorder": "lens_core/_native/_recorder.pyx",
    "lens_core._native._encode": "lens_core/_native/_encode.pyx",
    "lens_core._native._goodput": "lens_core/_native/_goodput.pyx",
    "lens_report._scan": "lens_report/_scan.pyx",  # the report's compiled reader (else its SQL reader)
}
REPORT_READER = "lens_report._scan"


def _fell_back(why, build_lib=None):
    message = (f"WARNING: lens_core's compiled modules were not built ({why}); the pure-Python "
               "gate and recorder will be used (lens_core.IMPLEMENTATION == 'python')")
    print(message, file=sys.stderr)
    for root in filter(None, (build_lib, ".")):
        mark = os.path.join(root, FAILED_MARK)
        if os.path.isdir(os.path.dirname(mark)):
            with open(mark, "w") as out:
                out.write(f"{why}\n")


class BuildNative(build_ext):
    """build_ext that turns an optional build failure into a visible warning and a marker."""

    def build_extension(self, ext):
        # the report's reader fails alone: lens_core's gate and wing are built all the same
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - a compiler failure in that one module
            if ext.name != REPORT_READER or MODE == "1":
                raise
            self.skipped = getattr(self, "skipped", set()) | {ext.name}
            print(f"WARNING: the report's compiled reader ({REPORT_READER}) was not built ({exc}); "
                  "lens report reads every file with its SQL reader (the same rows, more CPU)", file=sys.stderr)

    def build_extensions(self):
        super().build_extensions()
        # what was not built is neither copied in place nor listed among the outputs
        self.extensions = [ext for ext in self.extensions if ext.name not in getattr(self, "skipped", ())]

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/Cython failure
            if MODE == "1":
                raise
            _fell_back(f"compiler: {exc}", self.build_lib)
            return
        for root in filter(None, (self.build_lib, ".")):
            mark = os.path.join(root, FAILED_MARK)
            if os.path.exists(mark):
                os.remove(mark)


ext_modules = []
if MODE != "0":
    try:
        from Cython.Build import cythonize

        ext_modules = cythonize([Extension(name, [source]) for name, source in MODULES.items()],
                                language_level=3, quiet=True)
    except Exception as exc:  # noqa: BLE001 - Cython missing, or a .pyx failed to compile
        if MODE == "1":
            raise
        _fell_back(f"Cython: {exc!r}")

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildNative})
