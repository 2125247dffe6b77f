#!/usr/bin/env bash
# A source install is compiled, or says loudly that it is not:
# 1. build an sdist, a wheel from that sdist, install the wheel into a fresh venv: the compiled
#    gate, recorder, encoders and the report's reader must load (a platform wheel, not py3-none-any);
# 2. the same sdist built with a compiler that fails: the install still works (pure Python) and
#    `import lens_core` says so on stderr, without pip's -v;
# 3. the sdist with the report's reader (lens_report/_scan.pyx) broken: the gate is still compiled;
# 4. `lens --version` is pyproject's version: from the sdist's wheel and from an editable install.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python -m pip install -q build
python -m build --sdist --outdir "$work/dist" . >/dev/null
sdist="$(ls "$work"/dist/*.tar.gz)"
echo "sdist: $(basename "$sdist") ($(tar tzf "$sdist" | grep -cE '\.(pyx|pxd|pyi)$') .pyx/.pxd/.pyi files)"

python -m pip wheel -q --no-deps "$sdist" -w "$work/wheel"
wheel="$(ls "$work"/wheel/*.whl)"
echo "wheel from the sdist: $(basename "$wheel")"
case "$wheel" in *py3-none-any*) echo "FAIL: the wheel built from the sdist is pure Python" >&2; exit 1;; esac
python -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-deps "$wheel"
version="$(python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
check_version() {  # $1: a venv, $2: what was installed there
  local said
  said="$(cd "$work" && "$1/bin/python" -m lens_cli --version)"
  if [ "$said" != "lens $version" ]; then
    echo "FAIL: $2 says '$said', pyproject.toml says $version" >&2; exit 1
  fi
  echo "$2: $said"
}
check_version "$work/venv" "lens --version from the sdist's wheel"
(cd "$work" && "$work/venv/bin/python" - <<'PY'
import lens_core
from lens_core import _impl
from lens_core._native import _encode, _recorder  # noqa: F401 - the compiled wing loads
assert lens_core.IMPLEMENTATION == "cython", lens_core.IMPLEMENTATION
assert _impl.recorder().IMPLEMENTATION == "cython"
from lens_report import _scan  # noqa: F401 - the report's compiled reader
from importlib import resources
for name in ("page.js", "page.css"):  # the HTML page's script and style ship as package files
    assert resources.files("lens_report").joinpath("page", name).is_file(), f"{name} missing from the wheel"
print("installed from the sdist's wheel: gate", lens_core.IMPLEMENTATION, "and recorder", _impl.recorder().IMPLEMENTATION,
      "and the report's compiled reader")
PY
)

# A failed build falls back to pure Python and says so at import (stderr, no -v needed).
CC=false LENS_BUILD_EXT= python -m pip wheel -q --no-deps --no-cache-dir "$sdist" -w "$work/wheel-failed" 2>/dev/null
failed="$(ls "$work"/wheel-failed/*.whl)"
python -m venv "$work/venv2"
"$work/venv2/bin/pip" install -q --no-deps "$failed"
err="$(cd "$work" && "$work/venv2/bin/python" -c "import lens_core; assert lens_core.IMPLEMENTATION == 'python'" 2>&1 >/dev/null)"
case "$err" in
  *"failed to build"*) echo "a failed build says so at import: $err";;
  *) echo "FAIL: a wheel whose build failed imported silently as pure Python (stderr: '$err')" >&2; exit 1;;
esac

# The report's compiled reader failing alone (a platform without getline, say) leaves lens_core compiled.
mkdir "$work/broken" && tar xzf "$sdist" -C "$work/broken"
src="$(ls -d "$work"/broken/*/)"
printf '\ncdef extern from *:\n    """\n#error the reader deliberately broken by .ci/sdist_check.sh\n"""\n' >> "$src/lens_report/_scan.pyx"
LENS_BUILD_EXT= python -m pip wheel -q --no-deps --no-cache-dir "$src" -w "$work/wheel-broken" 2>/dev/null
python -m venv "$work/venv3"
"$work/venv3/bin/pip" install -q --no-deps "$work"/wheel-broken/*.whl
(cd "$work" && "$work/venv3/bin/python" - <<'PY'
import importlib.util
import lens_core
assert lens_core.IMPLEMENTATION == "cython", lens_core.IMPLEMENTATION
assert importlib.util.find_spec("lens_report._scan") is None
from lens_report.engine import compiled_reader
assert compiled_reader() is None
print("the reader's build failing alone: gate", lens_core.IMPLEMENTATION, "and the report on its SQL reader")
PY
)

# An editable install of this tree (pure Python: the version is what is checked) reports pyproject's version.
python -m venv "$work/venv4"
LENS_BUILD_EXT=0 "$work/venv4/bin/pip" install -q --no-deps -e . 2>/dev/null
check_version "$work/venv4" "lens --version from an editable install"
