/* The observation log: what every process of an observed compile writes, one record a line,
 * and what engine/observe/observed_reads.h reads back. C, so that the preloaded library
 * (observe_preload.c), which runs inside the compiler's processes, shares it with the reader.
 *
 * A record is one line written with one write(2) to a file opened O_APPEND, so records of
 * concurrent processes never interleave:
 *
 *     <kind> ' ' <pid> ' ' <payload> '\n'
 *
 * The payload is text; '\\' and '\n' in it are written "\\\\" and "\\n". Its fields, where a
 * kind has several, are separated by '\t' (which paths and names may hold only escaped as
 * "\\t"). Paths are absolute: the writer resolves relative ones against its working directory
 * or the descriptor they are relative to. */
#ifndef KCACHE_ENGINE_OBSERVE_OBSERVE_LOG_H_
#define KCACHE_ENGINE_OBSERVE_OBSERVE_LOG_H_

/* The variables the launcher sets for an observed compile. Processes that run with
 * KCACHE_OBSERVE_LOG set record into it; the preloaded library puts both back into the
 * environment of every program a process starts, should the process have dropped them. */
#define KCACHE_OBSERVE_LOG_VAR "KCACHE_OBSERVE_LOG"
/* Colon-separated real paths of programs whose own reads are not recorded (kcache's own
 * launchers, when a compile runs one as its host compiler: they only pick and exec the real
 * compiler, which is recorded). */
#define KCACHE_OBSERVE_SKIP_VAR "KCACHE_OBSERVE_SKIP"

/* Record kinds. */
/* A process started: payload "<ppid>\t<its executable's real path>". */
#define KCACHE_OBSERVE_START 'S'
/* A shared object loaded in a process (at its start or by dlopen): payload the path. */
#define KCACHE_OBSERVE_LOADED 'B'
/* A file or directory opened for reading: payload the path. */
#define KCACHE_OBSERVE_READ 'R'
/* A path opened for writing, created, renamed or removed: payload the path. Such paths are
 * the compile's own outputs and temporaries, never its inputs. */
#define KCACHE_OBSERVE_WRITE 'W'
/* A path that exists, asked about without being read (stat, access, O_PATH): payload the
 * path. */
#define KCACHE_OBSERVE_EXISTS 'X'
/* The same through lstat (a symbolic link is not followed): payload the path. */
#define KCACHE_OBSERVE_LEXISTS 'K'
/* A path found absent (ENOENT or ENOTDIR): payload the path. */
#define KCACHE_OBSERVE_ABSENT 'A'
/* Any other failure of a look at a path: payload "<errno>\t<path>". */
#define KCACHE_OBSERVE_FAILED 'F'
/* A directory's entries were listed (opendir, scandir): payload the path. */
#define KCACHE_OBSERVE_LISTED 'D'
/* A library asked for by name (dlopen) that could not be loaded: payload the name. */
#define KCACHE_OBSERVE_UNLOADABLE 'l'
/* readlink: payload "<path>\t<target>". */
#define KCACHE_OBSERVE_LINK 'L'
/* realpath, canonicalize_file_name: payload "<path>\t<result>". */
#define KCACHE_OBSERVE_REALPATH 'P'
/* getenv of a set variable: payload "<name>=<value>". */
#define KCACHE_OBSERVE_ENV 'G'
/* getenv of an unset variable: payload "<name>". */
#define KCACHE_OBSERVE_ENV_UNSET 'g'
/* The process read the clock (time) or made a time into a local date (localtime, ctime): how
 * a preprocessor expands __DATE__, __TIME__ and __TIMESTAMP__. Payload empty. */
#define KCACHE_OBSERVE_CLOCK 'T'
/* The process is about to replace itself with, or has spawned, a program: payload
 * "<pid that will run it>\t<path>". A process that starts under that pid records
 * KCACHE_OBSERVE_START; one whose exec failed records why. */
#define KCACHE_OBSERVE_EXEC 'x'
/* The program about to run cannot be observed: payload "<path>\t<why>" (statically linked,
 * set-user-ID, another machine's code, a tree walk the library does not follow). */
#define KCACHE_OBSERVE_UNOBSERVABLE 'U'
/* A program was started with, or a process read from its environment, an option that lets
 * the machine it runs on pick the code (-march=native, -mcpu=native, -mtune=native, nvcc's
 * -arch=native): what the machine is, no file says. Payload "<program or variable>\t<the
 * argument or value>". */
#define KCACHE_OBSERVE_NATIVE 'N'

/* What a call's flags and errno say, for the rules both recorders follow (observe_record.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

/* Whether open(2) flags make it a write: the path is then an output (KCACHE_OBSERVE_WRITE). */
static inline int KcacheObserveFlagsWrite(int flags) {
  return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0;
}
/* Whether an fopen mode writes. */
static inline int KcacheObserveModeWrites(const char* mode) {
  return mode != NULL && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));
}
/* Whether a look at a path that failed with `err` found it absent (KCACHE_OBSERVE_ABSENT), not
 * another failure (KCACHE_OBSERVE_FAILED). */
static inline int KcacheObserveFoundAbsent(int err) { return err == ENOENT || err == ENOTDIR; }

#endif /* KCACHE_ENGINE_OBSERVE_OBSERVE_LOG_H_ */
