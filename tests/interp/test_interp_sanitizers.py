"""The interpreter's runtime under AddressSanitizer and UndefinedBehaviorSanitizer (`-m slow`): every
execution-runtime source (src/heddle/interp/rt/*.cpp, the files heddle.interpret compiles beside a
printed kernel) builds with -fsanitize=address,undefined, and the PTX self-test program
(tests/interp/ptx_selftest*.cpp: numbers, mma.sync, ldmatrix, wgmma, TMA, tcgen05 over hrt_ptx*.h) built
the same way runs with every check passing and no sanitizer report (-fno-sanitize-recover: the first
finding ends the run). Skipped with the reason when the host compiler has no sanitizer runtime."""
import os
import subprocess

import pytest

from support.selftest_defs import CXX, ROOT

pytestmark = pytest.mark.slow

FLAGS = ["-std=c++17", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all"]
RUNTIME = sorted((ROOT / "src" / "heddle" / "interp" / "rt").glob("*.cpp"))
SELFTEST = sorted((ROOT / "tests" / "interp").glob("ptx_selftest*.cpp"))
ENV = dict(os.environ, ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0",
           UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")


def _compile(args, timeout=600):
    return subprocess.run([CXX, *FLAGS, f"-I{ROOT / 'src'}", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def sanitizers(tmp_path_factory):
    """A directory to build in, once the compiler is known to link and run a sanitized program."""
    if CXX is None:
        pytest.skip("no host C++ compiler (g++ or clang++) found")
    d = tmp_path_factory.mktemp("sanitizers")
    (d / "probe.cpp").write_text("#include <vector>\nint main() { std::vector<int> v(3); return v[1]; }\n")
    build = _compile([d / "probe.cpp", "-o", d / "probe"], timeout=300)
    if build.returncode != 0:
        pytest.skip(f"{CXX} cannot build with -fsanitize=address,undefined (no sanitizer runtime?): "
                    + (build.stderr.strip().splitlines() or ["no output"])[-1])
    run = subprocess.run([str(d / "probe")], capture_output=True, text=True, timeout=60, env=ENV)
    if run.returncode != 0:  # e.g. ASan refusing to run under ptrace or a small address space
        pytest.skip(f"a sanitized program does not run here: {(run.stderr.strip().splitlines() or ['rc'])[-1]}")
    return d


@pytest.mark.parametrize("source", RUNTIME, ids=lambda p: p.name)
def test_runtime_source_builds_with_sanitizers(sanitizers, source):
    r = _compile(["-fPIC", "-fno-strict-aliasing", "-c", source, "-o", sanitizers / (source.stem + ".o")])
    assert r.returncode == 0, f"{source.name} under -fsanitize=address,undefined:\n{r.stderr[-4000:]}"


def test_ptx_selftest_runs_clean_under_sanitizers(sanitizers):
    exe = sanitizers / "ptx_selftest"
    build = _compile([*SELFTEST, "-o", exe], timeout=1200)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, env=ENV)
    report = run.stdout[-2000:] + run.stderr[-6000:]
    assert run.returncode == 0, report
    assert "runtime error" not in run.stderr and "Sanitizer" not in run.stderr, report
    ok = [line for line in run.stdout.splitlines() if line.startswith("ok ")]
    assert len(ok) > 20, report  # the self-test ran its checks (test_interp_ptx.py names each one)
