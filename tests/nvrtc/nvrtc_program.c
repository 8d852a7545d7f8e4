/* A program that uses NVRTC the two ways a host process does, for the NVRTC stand-ins' tests
 * (tests/integration/nvrtc_standin_test.cc): built linked with the toolkit's libnvrtc
 * (nvrtc_linked_program) and, with KCACHE_TEST_DLOPEN (a soname), loading it with dlopen
 * (nvrtc_dlopen_program: "libnvrtc.so.13"; nvrtc12_dlopen_program: "libnvrtc.so.12"). Each runs
 * the same with and without the stand-in preloaded, so that its outputs can be compared byte
 * for byte.
 *
 *   PROGRAM compile DIR     compiles a kernel to PTX (compute_89) and CUBIN (sm_89), writing
 *                           DIR/ptx, DIR/cubin, DIR/log, DIR/names (its lowered names) and
 *                           DIR/nulls (what the getters answer given a NULL to write to)
 *   PROGRAM threads N DIR   N threads compile the kernel to PTX at once; DIR/ptx is thread 0's,
 *                           and every thread's must be the same
 *   PROGRAM churn DIR       8 threads compile the kernel to PTX 3 times each while 8 others
 *                           create and destroy programs (100 each) without compiling them;
 *                           every PTX must be the same (DIR/ptx)
 *   PROGRAM missing         every call fails with NVRTC_ERROR_INTERNAL_ERROR (no real NVRTC)
 *   PROGRAM internals       calls the undocumented entries with arguments they refuse
 *   PROGRAM bench N         N calls of nvrtcVersion, and one compile, timed
 *   PROGRAM includes DIR [OPTION]
 *                           compiles a kernel that includes "hdr.h" with -I DIR/a -I DIR/b
 *                           (and OPTION), while another thread of the program keeps reading
 *                           DIR/unrelated; writes DIR/ptx
 *   PROGRAM named DIR KIND  names its program in a new directory of DIR's, as CuPy does (a new
 *                           temporary directory each time), and prints the name:
 *                             plain    as `compile` does (a kernel that draws no warning),
 *                                      the directory removed first (CuPy's way: NVRTC does not
 *                                      read the program's file)
 *                             file     the same, the kernel holding its __FILE__
 *                             sibling=VALUE  a kernel that includes "hdr.h", which the
 *                                      directory holds (kValue = VALUE); writes DIR/ptx
 *   PROGRAM source OUT NAME FILE [ARG...]
 *                           compiles FILE's text as a program named NAME ("" for NULL), each
 *                           ARG an NVRTC option, or --header=INCLUDE=PATH (a header in memory:
 *                           PATH's text under INCLUDE) or --expr=EXPRESSION (a name
 *                           expression); writes OUT/ptx and OUT/log
 * Each mode prints "nvrtc: PATH", the file nvrtcCompileProgram is found in, first. Exit 0 when
 * all went as the mode expects, 1 otherwise. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef KCACHE_TEST_DLOPEN
static void* Library(void) {
  static void* handle;
  if (handle == NULL) handle = dlopen(KCACHE_TEST_DLOPEN, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", KCACHE_TEST_DLOPEN, dlerror());
    exit(1);
  }
  return handle;
}
#define NVRTC(name) ((__typeof__(&name))Symbol(#name))
#else
static void* Library(void) { return RTLD_DEFAULT; }
#define NVRTC(name) name
#endif

static void* Symbol(const char* name) {
  void* found = dlsym(Library(), name);
  if (found == NULL) {
    fprintf(stderr, "no %s\n", name);
    exit(1);
  }
  return found;
}

/* No internal-linkage symbols: its CUBIN is the same in every process. */
static const char kSource[] =
    "template <typename T>\n"
    "__global__ void scale(T* data, T factor, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int unused = 0;\n"
    "  if (i < n) data[i] *= factor;\n"
    "}\n"
    "extern \"C\" __global__ void add_one(float* data, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) data[i] += 1.0f;\n"
    "}\n";
static const char* const kNames[] = {"scale<float>", "scale<double>"};
/* What Compile compiles, and the program's name. */
static const char* g_source = kSource;
static const char* g_name = "scale.cu";

static int Check(nvrtcResult result, const char* what) {
  if (result == NVRTC_SUCCESS) return 1;
  fprintf(stderr, "%s: %s\n", what, NVRTC(nvrtcGetErrorString)(result));
  return 0;
}

static int WriteFile(const char* dir, const char* name, const char* data, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* file = fopen(path, "wb");
  if (file == NULL) return 0;
  int ok = fwrite(data, 1, size, file) == size;
  return fclose(file) == 0 && ok;
}

/* Compiles kSource for `arch`; the program is left in *prog (destroyed by the caller). */
static int Compile(const char* arch, nvrtcProgram* prog) {
  if (!Check(NVRTC(nvrtcCreateProgram)(prog, g_source, g_name, 0, NULL, NULL), "create")) {
    return 0;
  }
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
    if (!Check(NVRTC(nvrtcAddNameExpression)(*prog, kNames[i]), "add name")) return 0;
  }
  char option[64];
  snprintf(option, sizeof option, "--gpu-architecture=%s", arch);
  const char* options[] = {option, "-std=c++17"};
  return Check(NVRTC(nvrtcCompileProgram)(*prog, 2, options), "compile");
}

static char* Ptx(nvrtcProgram prog, size_t* size) {
  if (!Check(NVRTC(nvrtcGetPTXSize)(prog, size), "ptx size")) return NULL;
  char* ptx = malloc(*size);
  if (ptx == NULL || !Check(NVRTC(nvrtcGetPTX)(prog, ptx), "ptx")) return NULL;
  return ptx;
}

static int CompileToFiles(const char* dir) {
  nvrtcProgram prog;
  size_t size = 0;
  if (!Compile("compute_89", &prog)) return 0;
  char* ptx = Ptx(prog, &size);
  if (ptx == NULL || !WriteFile(dir, "ptx", ptx, size)) return 0;
  free(ptx);
  NVRTC(nvrtcDestroyProgram)(&prog);

  if (!Compile("sm_89", &prog)) return 0;
  if (!Check(NVRTC(nvrtcGetCUBINSize)(prog, &size), "cubin size")) return 0;
  char* cubin = malloc(size);
  if (cubin == NULL || !Check(NVRTC(nvrtcGetCUBIN)(prog, cubin), "cubin")) return 0;
  if (!WriteFile(dir, "cubin", cubin, size)) return 0;
  free(cubin);
  if (!Check(NVRTC(nvrtcGetProgramLogSize)(prog, &size), "log size")) return 0;
  char* log = malloc(size);
  if (log == NULL || !Check(NVRTC(nvrtcGetProgramLog)(prog, log), "log")) return 0;
  if (!WriteFile(dir, "log", log, strlen(log))) return 0;
  free(log);
  char names[4096] = "";
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
    const char* lowered = NULL;
    if (!Check(NVRTC(nvrtcGetLoweredName)(prog, kNames[i], &lowered), "lowered name")) return 0;
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s %s\n", kNames[i], lowered);
  }
  /* What each getter answers given nowhere to write (a caller's mistake): NVRTC's own answer. */
  char nulls[256];
  snprintf(
      nulls, sizeof nulls, "ptx size %d\nptx %d\ncubin size %d\ncubin %d\nlog %d\nlowered %d\n",
      NVRTC(nvrtcGetPTXSize)(prog, NULL), NVRTC(nvrtcGetPTX)(prog, NULL),
      NVRTC(nvrtcGetCUBINSize)(prog, NULL), NVRTC(nvrtcGetCUBIN)(prog, NULL),
      NVRTC(nvrtcGetProgramLog)(prog, NULL), NVRTC(nvrtcGetLoweredName)(prog, kNames[0], NULL));
  NVRTC(nvrtcDestroyProgram)(&prog);
  return WriteFile(dir, "names", names, strlen(names)) &&
         WriteFile(dir, "nulls", nulls, strlen(nulls));
}

struct ThreadResult {
  char* ptx;
  size_t size;
};

static void* CompileInThread(void* arg) {
  struct ThreadResult* result = arg;
  nvrtcProgram prog;
  if (Compile("compute_89", &prog)) {
    result->ptx = Ptx(prog, &result->size);
    NVRTC(nvrtcDestroyProgram)(&prog);
  }
  return NULL;
}

static int CompileInThreads(int count, const char* dir) {
  pthread_t threads[64];
  struct ThreadResult results[64];
  if (count < 1 || count > 64) return 0;
  memset(results, 0, sizeof results);
  for (int i = 0; i < count; ++i) pthread_create(&threads[i], NULL, CompileInThread, &results[i]);
  for (int i = 0; i < count; ++i) pthread_join(threads[i], NULL);
  int same = 1;
  for (int i = 0; i < count; ++i) {
    if (results[i].ptx == NULL || results[i].size != results[0].size ||
        memcmp(results[i].ptx, results[0].ptx, results[0].size) != 0) {
      fprintf(stderr, "thread %d: %s\n", i, results[i].ptx == NULL ? "failed" : "another PTX");
      same = 0;
    }
  }
  return same && WriteFile(dir, "ptx", results[0].ptx, results[0].size);
}

struct Churner {
  int compiles; /* 0: create and destroy only */
  struct ThreadResult result;
  int failed;
};

static void* Churn(void* arg) {
  struct Churner* churner = arg;
  for (int round = 0; round < (churner->compiles ? 3 : 100); ++round) {
    nvrtcProgram prog;
    if (churner->compiles) {
      if (!Compile("compute_89", &prog)) {
        churner->failed = 1;
        return NULL;
      }
      size_t size = 0;
      char* ptx = Ptx(prog, &size);
      if (ptx == NULL ||
          (churner->result.ptx != NULL &&
           (size != churner->result.size || memcmp(ptx, churner->result.ptx, size)))) {
        churner->failed = 1;
      }
      free(churner->result.ptx);
      churner->result.ptx = ptx;
      churner->result.size = size;
    } else {
      if (!Check(NVRTC(nvrtcCreateProgram)(&prog, kSource, "scale.cu", 0, NULL, NULL), "create") ||
          !Check(NVRTC(nvrtcAddNameExpression)(prog, kNames[0]), "add name")) {
        churner->failed = 1;
        return NULL;
      }
    }
    NVRTC(nvrtcDestroyProgram)(&prog);
  }
  return NULL;
}

static int CompileWhileOthersChurn(const char* dir) {
  enum { kThreads = 16 };
  pthread_t threads[kThreads];
  struct Churner churners[kThreads];
  memset(churners, 0, sizeof churners);
  for (int i = 0; i < kThreads; ++i) {
    churners[i].compiles = i % 2 == 0;
    pthread_create(&threads[i], NULL, Churn, &churners[i]);
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  int ok = 1;
  for (int i = 0; i < kThreads; ++i) {
    if (churners[i].failed) {
      fprintf(stderr, "thread %d failed or got another PTX\n", i);
      ok = 0;
    }
    if (churners[i].compiles && churners[i].result.ptx != NULL &&
        (churners[i].result.size != churners[0].result.size ||
         memcmp(churners[i].result.ptx, churners[0].result.ptx, churners[0].result.size) != 0)) {
      fprintf(stderr, "thread %d: another PTX than thread 0's\n", i);
      ok = 0;
    }
  }
  return ok && churners[0].result.ptx != NULL &&
         WriteFile(dir, "ptx", churners[0].result.ptx, churners[0].result.size);
}

static int AllFail(void) {
  int major = 0, minor = 0;
  nvrtcResult version = NVRTC(nvrtcVersion)(&major, &minor);
  nvrtcProgram prog = NULL;
  nvrtcResult create = NVRTC(nvrtcCreateProgram)(&prog, kSource, "scale.cu", 0, NULL, NULL);
  nvrtcResult compile = NVRTC(nvrtcCompileProgram)(prog, 0, NULL);
  printf("nvrtcVersion: %d\nnvrtcCreateProgram: %d\nnvrtcCompileProgram: %d\nmessage: %s\n",
         version, create, compile, NVRTC(nvrtcGetErrorString)(create));
  return version == NVRTC_ERROR_INTERNAL_ERROR && create == NVRTC_ERROR_INTERNAL_ERROR &&
         compile == NVRTC_ERROR_INTERNAL_ERROR;
}

static int Internals(void) {
  typedef int (*CompileEx)(void*, void*, void*, void*, void*, void*, void*, void*, void*);
  typedef void* (*Handle)(int);
  CompileEx compile_ex = (CompileEx)Symbol("__nvrtcCPEx");
  Handle handle = (Handle)dlsym(Library(), "__nvrtcNvvmHandle");
  for (int call = 0; call < 2; ++call) { /* the first resolves, the second jumps */
    printf("__nvrtcCPEx: %d\n", compile_ex(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    if (handle != NULL) {
      printf("__nvrtcNvvmHandle(0x4321): %s\n", handle(0x4321) != NULL ? "found" : "NULL");
    } else {
      printf("__nvrtcNvvmHandle: not exported\n");
    }
  }
  return 1;
}

struct Reader {
  const char* path;
  int stop;
  long reads;
};

static void* KeepReading(void* arg) {
  struct Reader* reader = arg;
  while (!__atomic_load_n(&reader->stop, __ATOMIC_ACQUIRE)) {
    FILE* file = fopen(reader->path, "rb");
    if (file != NULL) fclose(file);
    ++reader->reads;
  }
  return NULL;
}

static int CompileIncludes(const char* dir, const char* extra) {
  static const char kIncluding[] =
      "#include \"hdr.h\"\n"
      "extern \"C\" __global__ void fill(float* data) { data[threadIdx.x] = kValue; }\n";
  char a[4200], b[4200], unrelated[4200];
  snprintf(a, sizeof a, "-I%s/a", dir);
  snprintf(b, sizeof b, "-I%s/b", dir);
  snprintf(unrelated, sizeof unrelated, "%s/unrelated", dir);
  struct Reader reader = {unrelated, 0, 0};
  pthread_t thread;
  pthread_create(&thread, NULL, KeepReading, &reader);
  nvrtcProgram prog;
  const char* options[] = {a, b, "--gpu-architecture=compute_89", extra};
  int ok =
      Check(NVRTC(nvrtcCreateProgram)(&prog, kIncluding, "fill.cu", 0, NULL, NULL), "create") &&
      Check(NVRTC(nvrtcCompileProgram)(prog, extra != NULL ? 4 : 3, options), "compile");
  __atomic_store_n(&reader.stop, 1, __ATOMIC_RELEASE);
  pthread_join(thread, NULL);
  printf("the other thread read %s %ld times\n", unrelated, reader.reads);
  if (!ok) return 0;
  size_t size = 0;
  char* ptx = Ptx(prog, &size);
  ok = ptx != NULL && WriteFile(dir, "ptx", ptx, size);
  free(ptx);
  NVRTC(nvrtcDestroyProgram)(&prog);
  return ok && reader.reads > 0;
}

static int CompileNamed(const char* dir, const char* kind) {
  char directory[4200], name[4300];
  snprintf(directory, sizeof directory, "%s/progXXXXXX", dir);
  if (mkdtemp(directory) == NULL) return 0;
  printf("name: %s/", directory);
  if (strcmp(kind, "plain") == 0 || strcmp(kind, "file") == 0) {
    /* kSource without its unused variable, whose warning would name the program in the log. */
    static char source[sizeof kSource + 128];
    static const char kUnused[] = "  int unused = 0;\n";
    const char* unused = strstr(kSource, kUnused);
    snprintf(source, sizeof source, "%.*s%s%s", (int)(unused - kSource), kSource,
             unused + strlen(kUnused),
             strcmp(kind, "file") == 0 ? "__device__ const char* file_name = __FILE__;\n" : "");
    g_source = source;
    snprintf(name, sizeof name, "%s/scale.cu", directory);
    g_name = name;
    printf("scale.cu\n");
    return rmdir(directory) == 0 && CompileToFiles(dir);
  }
  if (strncmp(kind, "sibling=", 8) != 0) return 0;
  static const char kIncluding[] =
      "#include \"hdr.h\"\n"
      "extern \"C\" __global__ void fill(float* data) { data[threadIdx.x] = kValue; }\n";
  char header[256];
  snprintf(header, sizeof header, "constexpr float kValue = %s;\n", kind + 8);
  snprintf(name, sizeof name, "%s/fill.cu", directory);
  printf("fill.cu\n");
  nvrtcProgram prog;
  const char* options[] = {"--gpu-architecture=compute_89"};
  int ok = WriteFile(directory, "hdr.h", header, strlen(header)) &&
           Check(NVRTC(nvrtcCreateProgram)(&prog, kIncluding, name, 0, NULL, NULL), "create") &&
           Check(NVRTC(nvrtcCompileProgram)(prog, 1, options), "compile");
  size_t size = 0;
  char* ptx = ok ? Ptx(prog, &size) : NULL;
  ok = ptx != NULL && WriteFile(dir, "ptx", ptx, size);
  free(ptx);
  if (ok) NVRTC(nvrtcDestroyProgram)(&prog);
  /* The directory stays (under DIR): kcache compiles the program again after this returns. */
  return ok;
}

/* FILE's whole text, or NULL. */
static char* ReadText(const char* path) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) return NULL;
  size_t size = 0, capacity = 4096;
  char* text = malloc(capacity);
  size_t got;
  while (text != NULL && (got = fread(text + size, 1, capacity - size - 1, file)) > 0) {
    size += got;
    if (capacity - size - 1 == 0) text = realloc(text, capacity *= 2);
  }
  fclose(file);
  if (text != NULL) text[size] = 0;
  return text;
}

static int CompileSource(const char* out, const char* name, const char* path, int argc,
                         char** argv) {
  const char *headers[16], *includes[16], *expressions[16], *options[64];
  int num_headers = 0, num_expressions = 0, num_options = 0;
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "--header=", 9) == 0 && num_headers < 16) {
      char* include = strdup(argv[i] + 9);
      char* file = strchr(include, '=');
      if (file == NULL) return 0;
      *file++ = 0;
      includes[num_headers] = include;
      if ((headers[num_headers++] = ReadText(file)) == NULL) return 0;
    } else if (strncmp(argv[i], "--expr=", 7) == 0 && num_expressions < 16) {
      expressions[num_expressions++] = argv[i] + 7;
    } else if (num_options < 64) {
      options[num_options++] = argv[i];
    }
  }
  char* source = ReadText(path);
  nvrtcProgram prog;
  if (source == NULL || !Check(NVRTC(nvrtcCreateProgram)(&prog, source, *name ? name : NULL,
                                                         num_headers, headers, includes),
                               "create")) {
    return 0;
  }
  for (int i = 0; i < num_expressions; ++i) {
    if (!Check(NVRTC(nvrtcAddNameExpression)(prog, expressions[i]), "add name")) return 0;
  }
  int ok = Check(NVRTC(nvrtcCompileProgram)(prog, num_options, options), "compile");
  size_t size = 0;
  if (NVRTC(nvrtcGetProgramLogSize)(prog, &size) == NVRTC_SUCCESS) {
    char* log = malloc(size);
    if (log != NULL && NVRTC(nvrtcGetProgramLog)(prog, log) == NVRTC_SUCCESS) {
      WriteFile(out, "log", log, size > 0 ? size - 1 : 0);
      if (!ok) fprintf(stderr, "%s\n", log);
    }
    free(log);
  }
  char* ptx = ok ? Ptx(prog, &size) : NULL;
  ok = ptx != NULL && WriteFile(out, "ptx", ptx, size);
  free(ptx);
  NVRTC(nvrtcDestroyProgram)(&prog);
  return ok;
}

static double Seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static int Bench(long count) {
  int major, minor;
  nvrtcResult (*version)(int*, int*) = NVRTC(nvrtcVersion);
  version(&major, &minor); /* loads it */
  double start = Seconds();
  for (long i = 0; i < count; ++i) version(&major, &minor);
  double calls = Seconds() - start;
  nvrtcProgram prog;
  start = Seconds();
  int ok = Compile("compute_89", &prog);
  double compile = Seconds() - start;
  printf("nvrtcVersion: %.1f ns per call; a compile: %.1f ms\n", calls / (double)count * 1e9,
         compile * 1e3);
  return ok;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s compile DIR | threads N DIR | churn DIR | missing | internals | "
            "includes DIR [OPTION] | named DIR plain|file|sibling=VALUE | "
            "source OUT NAME FILE [ARG...] | bench N\n",
            argv[0]);
    return 2;
  }
  Dl_info info;
  void* compile = Symbol("nvrtcCompileProgram");
  printf("nvrtc: %s\n", dladdr(compile, &info) != 0 ? info.dli_fname : "?");
  fflush(stdout);
  int ok = 0;
  if (strcmp(argv[1], "compile") == 0 && argc == 3) {
    ok = CompileToFiles(argv[2]);
  } else if (strcmp(argv[1], "threads") == 0 && argc == 4) {
    ok = CompileInThreads(atoi(argv[2]), argv[3]);
  } else if (strcmp(argv[1], "churn") == 0 && argc == 3) {
    ok = CompileWhileOthersChurn(argv[2]);
  } else if (strcmp(argv[1], "missing") == 0) {
    ok = AllFail();
  } else if (strcmp(argv[1], "internals") == 0) {
    ok = Internals();
  } else if (strcmp(argv[1], "includes") == 0 && (argc == 3 || argc == 4)) {
    ok = CompileIncludes(argv[2], argc == 4 ? argv[3] : NULL);
  } else if (strcmp(argv[1], "named") == 0 && argc == 4) {
    ok = CompileNamed(argv[2], argv[3]);
  } else if (strcmp(argv[1], "source") == 0 && argc >= 5) {
    ok = CompileSource(argv[2], argv[3], argv[4], argc - 5, argv + 5);
  } else if (strcmp(argv[1], "bench") == 0 && argc == 3) {
    ok = Bench(atol(argv[2]));
  }
  return ok ? 0 : 1;
}
