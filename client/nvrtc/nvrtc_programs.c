/* The programs of a process, as the stand-in keeps them (nvrtc_programs.h). */
#define _GNU_SOURCE
#include "client/nvrtc/nvrtc_programs.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* nvrtc.h's, for answers the stand-in makes itself. */
#define NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID 10

typedef struct Served {
  int result;
  KcacheNvrtcOutput outputs[KCACHE_NVRTC_OUTPUTS]; /* bytes: copies */
  int num_lowered;
  int* lowered_results;
  char** expressions; /* the call's, in order */
  char** lowered;
} Served;

typedef struct Program {
  nvrtcProgram handle;
  struct Program* next; /* in its bucket */
  char* source;
  char* name; /* NULL when the caller gave none */
  int num_headers;
  char** headers;
  char** include_names;
  int num_expressions, expressions_room;
  char** expressions;
  Served* served;
  int broken; /* a copy failed: never cached */
} Program;

#define BUCKETS 4096
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static Program* g_buckets[BUCKETS];

static size_t Bucket(nvrtcProgram prog) {
  uintptr_t h = (uintptr_t)prog;
  h ^= h >> 17;
  h *= 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 40) % BUCKETS;
}

/* The program `prog` (g_mutex held); NULL when unknown. */
static Program* Find(nvrtcProgram prog) {
  for (Program* p = g_buckets[Bucket(prog)]; p != NULL; p = p->next) {
    if (p->handle == prog) return p;
  }
  return NULL;
}

static char* Copy(const char* text) { return text != NULL ? strdup(text) : NULL; }

static void FreeStrings(char** list, int count) {
  if (list == NULL) return;
  for (int i = 0; i < count; ++i) free(list[i]);
  free(list);
}

static void FreeServed(Served* served) {
  if (served == NULL) return;
  for (int i = 0; i < KCACHE_NVRTC_OUTPUTS; ++i) free((char*)served->outputs[i].bytes);
  free(served->lowered_results);
  FreeStrings(served->expressions, served->num_lowered);
  FreeStrings(served->lowered, served->num_lowered);
  free(served);
}

static void FreeProgram(Program* p) {
  free(p->source);
  free(p->name);
  FreeStrings(p->headers, p->num_headers);
  FreeStrings(p->include_names, p->num_headers);
  FreeStrings(p->expressions, p->num_expressions);
  FreeServed(p->served);
  free(p);
}

int KcacheProgramCreated(nvrtcProgram prog, const char* source, const char* name, int num_headers,
                         const char* const* headers, const char* const* include_names) {
  Program* p = calloc(1, sizeof *p);
  if (p == NULL) return -1;
  p->handle = prog;
  p->source = Copy(source);
  p->name = Copy(name);
  p->broken = source != NULL && p->source == NULL;
  p->broken |= name != NULL && p->name == NULL;
  if (num_headers > 0) {
    p->headers = calloc((size_t)num_headers, sizeof(char*));
    p->include_names = calloc((size_t)num_headers, sizeof(char*));
    if (p->headers == NULL || p->include_names == NULL) {
      p->broken = 1;
    } else {
      p->num_headers = num_headers;
      for (int i = 0; i < num_headers; ++i) {
        p->headers[i] = Copy(headers != NULL ? headers[i] : NULL);
        p->include_names[i] = Copy(include_names != NULL ? include_names[i] : NULL);
        /* NVRTC takes a NULL header as an empty one; a NULL name is refused before this. */
        p->broken |= p->include_names[i] == NULL;
        p->broken |= headers != NULL && headers[i] != NULL && p->headers[i] == NULL;
      }
    }
  }
  pthread_mutex_lock(&g_mutex);
  Program* old = Find(prog); /* a handle reused after a destroy the stand-in did not see */
  if (old != NULL) old->handle = NULL;
  size_t b = Bucket(prog);
  p->next = g_buckets[b];
  g_buckets[b] = p;
  pthread_mutex_unlock(&g_mutex);
  return p->broken ? -1 : 0;
}

void KcacheProgramNamed(nvrtcProgram prog, const char* expression) {
  pthread_mutex_lock(&g_mutex);
  Program* p = Find(prog);
  if (p != NULL && !p->broken) {
    if (p->num_expressions == p->expressions_room) {
      int room = p->expressions_room ? p->expressions_room * 2 : 8;
      char** grown = realloc(p->expressions, (size_t)room * sizeof(char*));
      if (grown == NULL) {
        p->broken = 1;
      } else {
        p->expressions = grown;
        p->expressions_room = room;
      }
    }
    if (!p->broken) {
      char* copy = Copy(expression);
      if (copy == NULL) {
        p->broken = 1;
      } else {
        p->expressions[p->num_expressions++] = copy;
      }
    }
  }
  pthread_mutex_unlock(&g_mutex);
}

void KcacheProgramDestroyed(nvrtcProgram prog) {
  pthread_mutex_lock(&g_mutex);
  size_t b = Bucket(prog);
  Program* found = NULL;
  for (Program** at = &g_buckets[b]; *at != NULL; at = &(*at)->next) {
    if ((*at)->handle == prog) {
      found = *at;
      *at = found->next;
      break;
    }
  }
  /* Entries orphaned by a reused handle go too. */
  for (Program** at = &g_buckets[b]; *at != NULL;) {
    if ((*at)->handle == NULL) {
      Program* orphan = *at;
      *at = orphan->next;
      FreeProgram(orphan);
    } else {
      at = &(*at)->next;
    }
  }
  pthread_mutex_unlock(&g_mutex);
  if (found != NULL) FreeProgram(found);
}

/* A snapshot: the program's strings copied (a destroy in another thread cannot pull them away). */
struct KcacheProgramSnapshot {
  char* source;
  char* name;
  int num_headers;
  char** headers;
  char** include_names;
  int num_expressions;
  char** expressions;
  int num_options;
  char** options;
};
typedef struct KcacheProgramSnapshot Snapshot;

static char** CopyList(char* const* list, int count, int* failed) {
  if (count <= 0) return NULL;
  char** copy = calloc((size_t)count, sizeof(char*));
  if (copy == NULL) {
    *failed = 1;
    return NULL;
  }
  for (int i = 0; i < count; ++i) {
    if (list[i] == NULL) continue;
    copy[i] = strdup(list[i]);
    if (copy[i] == NULL) *failed = 1;
  }
  return copy;
}

static void FreeSnapshot(Snapshot* s) {
  free(s->source);
  free(s->name);
  FreeStrings(s->headers, s->num_headers);
  FreeStrings(s->include_names, s->num_headers);
  FreeStrings(s->expressions, s->num_expressions);
  FreeStrings(s->options, s->num_options);
  free(s);
}

KcacheProgramSnapshot* KcacheProgramCall(nvrtcProgram prog, int num_options,
                                         const char* const* options, KcacheNvrtcCall* call) {
  if (num_options < 0 || (num_options > 0 && options == NULL)) return NULL;
  Snapshot* s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  int failed = 0;
  pthread_mutex_lock(&g_mutex);
  Program* p = Find(prog);
  if (p == NULL || p->broken || p->source == NULL) {
    failed = 1;
  } else {
    s->source = strdup(p->source);
    s->name = Copy(p->name);
    failed |= s->source == NULL || (p->name != NULL && s->name == NULL);
    s->num_headers = p->num_headers;
    s->headers = CopyList(p->headers, p->num_headers, &failed);
    s->include_names = CopyList(p->include_names, p->num_headers, &failed);
    s->num_expressions = p->num_expressions;
    s->expressions = CopyList(p->expressions, p->num_expressions, &failed);
  }
  pthread_mutex_unlock(&g_mutex);
  s->num_options = num_options;
  s->options = CopyList((char* const*)options, num_options, &failed);
  for (int i = 0; i < num_options && !failed; ++i) failed |= options[i] == NULL;
  if (failed) {
    FreeSnapshot(s);
    return NULL;
  }
  memset(call, 0, sizeof *call);
  call->source = s->source;
  call->name = s->name;
  call->num_headers = s->num_headers;
  call->headers = (const char* const*)s->headers;
  call->include_names = (const char* const*)s->include_names;
  call->num_options = s->num_options;
  call->options = (const char* const*)s->options;
  call->num_name_expressions = s->num_expressions;
  call->name_expressions = (const char* const*)s->expressions;
  return s;
}

void KcacheProgramCallDone(KcacheProgramSnapshot* snapshot) {
  if (snapshot != NULL) FreeSnapshot(snapshot);
}

int KcacheProgramServe(nvrtcProgram prog, const KcacheNvrtcResult* result) {
  Served* served = calloc(1, sizeof *served);
  if (served == NULL) return -1;
  int failed = 0;
  served->result = result->result;
  for (int i = 0; i < KCACHE_NVRTC_OUTPUTS; ++i) {
    served->outputs[i] = result->outputs[i];
    served->outputs[i].bytes = NULL;
    const KcacheNvrtcOutput* out = &result->outputs[i];
    if (out->result == KCACHE_NVRTC_SUCCESS && out->size > 0) {
      char* bytes = malloc(out->size);
      if (bytes == NULL || out->bytes == NULL) {
        free(bytes);
        failed = 1;
        continue;
      }
      memcpy(bytes, out->bytes, out->size);
      served->outputs[i].bytes = bytes;
    }
  }
  int n = result->num_lowered;
  served->num_lowered = n > 0 ? n : 0;
  if (n > 0) {
    served->lowered_results = calloc((size_t)n, sizeof(int));
    served->expressions = calloc((size_t)n, sizeof(char*));
    served->lowered = calloc((size_t)n, sizeof(char*));
    failed |=
        served->lowered_results == NULL || served->expressions == NULL || served->lowered == NULL;
  }
  pthread_mutex_lock(&g_mutex);
  Program* p = Find(prog);
  if (p == NULL || p->num_expressions != n) failed = 1;
  for (int i = 0; i < n && !failed; ++i) {
    served->lowered_results[i] = result->lowered_results[i];
    served->expressions[i] = strdup(p->expressions[i]);
    const char* lowered = result->lowered_names[i];
    served->lowered[i] = lowered != NULL ? strdup(lowered) : NULL;
    failed |= served->expressions[i] == NULL || (lowered != NULL && served->lowered[i] == NULL);
  }
  if (!failed) {
    FreeServed(p->served);
    p->served = served;
  }
  pthread_mutex_unlock(&g_mutex);
  if (failed) {
    FreeServed(served);
    return -1;
  }
  return 0;
}

void KcacheProgramUnserve(nvrtcProgram prog) {
  pthread_mutex_lock(&g_mutex);
  Program* p = Find(prog);
  Served* served = NULL;
  if (p != NULL) {
    served = p->served;
    p->served = NULL;
  }
  pthread_mutex_unlock(&g_mutex);
  FreeServed(served);
}

int KcacheServedOutput(nvrtcProgram prog, int kind, int size_query, size_t* size, char* out,
                       nvrtcResult* answer) {
  /* Nowhere to write: the real getter answers (NVRTC_ERROR_INVALID_INPUT), as without kcache. */
  if (size_query ? size == NULL : out == NULL) return 0;
  int served = 0;
  pthread_mutex_lock(&g_mutex);
  Program* p = Find(prog);
  if (p != NULL && p->served != NULL && kind >= 0 && kind < KCACHE_NVRTC_OUTPUTS) {
    const KcacheNvrtcOutput* o = &p->served->outputs[kind];
    served = 1;
    if (size_query) {
      *answer = o->size_result;
      if (o->size_result == KCACHE_NVRTC_SUCCESS && size != NULL) *size = o->size;
    } else {
      *answer = o->result;
      if (o->result == KCACHE_NVRTC_SUCCESS && out != NULL && o->bytes != NULL) {
        memcpy(out, o->bytes, o->size);
      }
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return served;
}

int KcacheServedLoweredName(nvrtcProgram prog, const char* expression, const char** lowered,
                            nvrtcResult* answer) {
  if (lowered == NULL) return 0; /* the real NVRTC answers, as above */
  int served = 0;
  pthread_mutex_lock(&g_mutex);
  Program* p = Find(prog);
  if (p != NULL && p->served != NULL) {
    served = 1;
    *answer = NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
    for (int i = 0; expression != NULL && i < p->served->num_lowered; ++i) {
      if (strcmp(p->served->expressions[i], expression) == 0) {
        *answer = p->served->lowered_results[i];
        if (*answer == KCACHE_NVRTC_SUCCESS && lowered != NULL) *lowered = p->served->lowered[i];
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return served;
}
