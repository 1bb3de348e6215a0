#!/usr/bin/env bash
# Sanitizer builds and their tests; CI runs both (docs/testing.md).
#
#   scripts/sanitize.sh address   # build-asan (GCC): AddressSanitizer + UBSan, the fast suite
#   scripts/sanitize.sh thread    # build-tsan (clang): ThreadSanitizer, the tests whose threads
#                                 # share memory: the background checkpoint writer, the threads
#                                 # plan, the sweep's process control
#
# The libraries, the command and the fuzz replays are instrumented; the test files are not (see
# HFTA_SANITIZE in CMakeLists.txt). A report fails the test that made it: UBSan stops at its first
# (-fno-sanitize-recover), ASan and TSan always exit non-zero.
# Extra arguments go to ctest, whose tests here are whole test executables
# (HFTA_TESTS_PER_EXECUTABLE in CMakeLists.txt; e.g. -R test_checkpoint); GTEST_FILTER in the
# environment picks the tests inside them.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh address|thread [ctest arguments]}
shift
jobs=$(nproc)

case $kind in
  address)
    build=build-asan
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHFTA_SANITIZE=address >/dev/null
    # Only what the fast suite runs: the slow tests' executables, the benchmarks and the
    # examples are not run under the sanitizers.
    cmake --build "$build" -j"$jobs" --target hfta_fast_tests
    export UBSAN_OPTIONS=print_stacktrace=1
    # glibc's per-thread dlerror buffer is not ours to free (scripts/lsan.supp says why).
    export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
    asan=check_initialization_order=1:strict_init_order=1
    # The fast suite, but for the command-line training comparisons (TrainCli*: whole fused and
    # serial runs of every model through `hfta train`, the same library code as the op and model
    # tests at larger shapes, 37% of the suite's time under ASan) and the MPI runs, which go next
    # without leak checks: Open MPI keeps allocations to its exit that LeakSanitizer reports.
    # Sanitized code runs 2-5x slower, hence the longer timeout.
    GTEST_FILTER='-Models/TrainCli*:TuneMpirun*' ASAN_OPTIONS=detect_leaks=1:$asan \
      ctest --test-dir "$build" -L fast -j"$jobs" --timeout 1200 --output-on-failure "$@"
    GTEST_FILTER='TuneMpirun*' ASAN_OPTIONS=detect_leaks=0:$asan \
      ctest --test-dir "$build" -L fast -R '^test_tune_mpi$' -j"$jobs" --timeout 1200 \
      --output-on-failure "$@"
    ;;
  thread)
    build=build-tsan
    # clang, for LLVM's OpenMP runtime and its Archer tool, which tells TSan about the OpenMP
    # barriers and tasks. GNU libgomp's barriers are invisible to TSan, which then reports every
    # parallel region after the first as a race.
    CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHFTA_SANITIZE=thread \
      >/dev/null
    tests=(test_checkpoint_writer test_plans test_sweep_process)  # HFTA_THREAD_TESTS
    cmake --build "$build" -j"$jobs" --target hfta_cli "${tests[@]}"
    # OpenBLAS and oneDNN are linked against GNU libgomp: they get LLVM's runtime under that name
    # (it implements libgomp's ABI), so one runtime, watched by Archer, runs every thread team.
    shim=$build/omp-shim
    mkdir -p "$shim"
    libomp=$(ldd "$build/hfta" | awk '/libomp[.]so/ {print $3}')
    [[ -f $libomp ]] || { echo "scripts/sanitize.sh: $build/hfta does not link libomp" >&2; exit 1; }
    ln -sf "$libomp" "$shim/libgomp.so.1"
    export LD_LIBRARY_PATH=$PWD/$shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export OMP_TOOL_LIBRARIES=$(dirname "$libomp")/libarcher.so
    [[ -f $OMP_TOOL_LIBRARIES ]] || { echo "scripts/sanitize.sh: no $OMP_TOOL_LIBRARIES" >&2; exit 1; }
    # Archer asks for ignore_noninstrumented_modules: the runtime's own accesses are not ours.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1"
    # The label `threads` marks these executables' tests (HFTA_THREAD_TESTS in CMakeLists.txt);
    # of the plans, those with threads (chunk plans run one group at a time, as fused does).
    GTEST_FILTER='-Plans/*chunk*' ctest --test-dir "$build" -L threads -j"$jobs" --timeout 1200 \
      --output-on-failure "$@"
    ;;
  *)
    echo "scripts/sanitize.sh: unknown kind '$kind': choose address or thread" >&2
    exit 2
    ;;
esac
