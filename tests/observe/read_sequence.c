/* One sequence of reads, looks and writes, for both recorders of what a process reads to record
 * (tests/integration/observe_recorders_agree_test.cc): the preload (LD_PRELOAD) and the NVRTC
 * stand-in's recorder, which routes a loaded library's calls (it hooks this library as it hooks
 * NVRTC). Each call has an outcome of its own kind, and none is made twice (the preload writes a
 * record once per process). The last two are too long to record: neither recorder cuts them short.
 *
 * Run in the directory the test made: `present`, `second`, `third` (files), `link` -> present,
 * `dir/` (empty). Relative paths throughout: both recorders make them absolute. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

__attribute__((visibility("default"))) void KcacheTestReadSequence(void) {
  struct stat st;
  char out[256];
  int fd = open("present", O_RDONLY); /* R */
  if (fd >= 0) close(fd);
  open("absent", O_RDONLY);                              /* A */
  open("second", O_WRONLY | O_CREAT | O_EXCL, 0644);     /* K: it exists */
  fd = open("made", O_WRONLY | O_CREAT | O_TRUNC, 0644); /* W */
  if (fd >= 0) close(fd);
  open("dir", O_WRONLY);            /* F 21: a directory */
  FILE* file = fopen("third", "r"); /* R */
  if (file != NULL) fclose(file);
  fopen("dir/inside", "r");     /* A */
  stat("second", &st);          /* X */
  stat("present/below", &st);   /* A: ENOTDIR */
  lstat("link", &st);           /* K */
  access("dir", R_OK);          /* X */
  access("nowhere", F_OK);      /* A */
  DIR* listed = opendir("dir"); /* D */
  if (listed != NULL) closedir(listed);
  opendir("no-dir");                   /* A */
  readlink("link", out, sizeof out);   /* L */
  readlink("third", out, sizeof out);  /* F 22: not a link */
  char* real = realpath("link", NULL); /* P */
  free(real);
  realpath("gone", NULL);       /* A */
  mkdir("dir", 0755);           /* K: it exists */
  mkdir("newdir", 0755);        /* W */
  unlink("never");              /* A */
  unlink("third");              /* W */
  getenv("KCACHE_TEST_SET");    /* G */
  getenv("KCACHE_TEST_UNSET");  /* g */
  getenv("KCACHE_TEST_NATIVE"); /* G, and N: -arch=native */
  time(NULL);                   /* T */
  getenv("KCACHE_TEST_LONG");   /* U: a value too long to record whole */
  char name[9001];
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  open(name, O_RDONLY); /* U: ENAMETOOLONG, and too long to be made absolute */
}
