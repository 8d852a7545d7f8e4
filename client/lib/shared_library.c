/* libkcache.so is kcache_client linked whole; its exported ABI is kcache/kcache_c.h. */
#include "kcache/kcache_c.h"
