/* Runs tests/observe/read_sequence.c's sequence under one of the two recorders:
 *
 *   read_sequence_runner preload LIBRARY   the sequence alone: run it with LD_PRELOAD of
 *                                          libkcache-observe.so and KCACHE_OBSERVE_LOG set
 *   read_sequence_runner nvrtc LIBRARY     the sequence with LIBRARY hooked by the NVRTC
 *                                          stand-in's recorder, its record printed to stdout
 *
 * Exits 0, or 2 with why on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/nvrtc/nvrtc_reads.h"

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "preload") != 0 && strcmp(argv[1], "nvrtc") != 0)) {
    fprintf(stderr, "usage: read_sequence_runner preload|nvrtc LIBRARY\n");
    return 2;
  }
  void* library = dlopen(argv[2], RTLD_NOW);
  if (library == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", argv[2], dlerror());
    return 2;
  }
  void (*sequence)(void) = (void (*)(void))dlsym(library, "KcacheTestReadSequence");
  if (sequence == NULL) {
    fprintf(stderr, "%s has no KcacheTestReadSequence\n", argv[2]);
    return 2;
  }
  if (strcmp(argv[1], "preload") == 0) {
    sequence();
    return 0;
  }
  char why[512];
  if (KcacheNvrtcReadsHook(library, why, sizeof why) != 0) {
    fprintf(stderr, "cannot hook %s: %s\n", argv[2], why);
    return 2;
  }
  KcacheNvrtcReads* reads = KcacheNvrtcReadsBegin();
  if (reads == NULL) {
    fprintf(stderr, "cannot begin a record\n");
    return 2;
  }
  sequence();
  size_t length = 0;
  int complete = 0;
  char* record = KcacheNvrtcReadsEnd(reads, &length, &complete);
  if (record == NULL || !complete) {
    fprintf(stderr, "the record is %s\n", record == NULL ? "missing" : "incomplete");
    return 2;
  }
  fwrite(record, 1, length, stdout);
  free(record);
  return 0;
}
