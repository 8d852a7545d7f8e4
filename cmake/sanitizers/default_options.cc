// Sanitizer builds only: cmake/Settings.cmake compiles this file into every executable when
// KCACHE_SANITIZE is set. The sanitizer runtimes read these before $ASAN_OPTIONS,
// $UBSAN_OPTIONS and $TSAN_OPTIONS (which still override them), so that the options hold in
// processes started with an empty environment too, such as the sandboxed compile workers.
// Every report ends the process with a failure: a test never passes over one.
extern "C" {

// detect_leaks stays on; the compile worker turns it off for itself
// (engine/workers/worker_main.cc: its sandbox refuses what LeakSanitizer needs at exit).
// verify_asan_link_order is off: under `kcache run` a compiler that runs the g++ shim (nvcc
// preprocessing) starts kcache-launch with the observer library (engine/observe, built without
// a sanitizer) in LD_PRELOAD, ahead of the ASan runtime; the runtime's interceptors still work.
const char* __asan_default_options() {
  return "halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:"
         "strict_init_order=1:verify_asan_link_order=0";
}

// NVRTC (closed source, not instrumented) calls strlen on a 2000-byte buffer of its own that
// holds no NUL byte, reading past it, in every compile (NVRTC 13.0). It is not ours to fix, and
// no reason to stop checking the rest: only the checks of the interceptors that libnvrtc itself
// calls are off. Our code, and what it hands NVRTC, stay checked.
const char* __asan_default_suppressions() { return "interceptor_via_lib:libnvrtc.so\n"; }

const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

const char* __tsan_default_options() { return "halt_on_error=1:second_deadlock_stack=1"; }

// Races TSan reports inside libraries that are not built with it, where they synchronize in
// ways it cannot see (for Abseil's own mutexes see tsan_abseil.cc):
// - RocksDB's write group: the leader copies the followers' write batches after a handoff
//   through atomics in librocksdb;
// - gRPC's own state: in its header code (grpc:: functions at the top of a report: a callback
//   tag built on one thread and run on the completion queue's, handed over inside libgrpc),
//   and what libgrpc itself frees or copies (its interceptor calls); our code that gRPC calls
//   back stays checked;
// - Abseil's deadlock detector (GraphCycles, behind a spinlock in libabsl);
// - RocksDB's memtable as a scan reads it: an entry another thread has just inserted (its bytes
//   copied in by librocksdb, published through atomics there) read through the iterator's slice
//   by RocksStore::ScanArtifacts, whose stack holds no librocksdb frame (seen when a test polls
//   kcached's statistics while a background build stores).
const char* __tsan_default_suppressions() {
  return "race:librocksdb.so\n"
         "race_top:grpc::\n"
         "race:grpc::internal::CallOp\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "race:kcache::store_internal::RocksStore::ScanArtifacts\n";
}

}  // extern "C"
