# Writes OUT, a C++ file defining kcache::cache_dirs::kCacheDirsYaml as the text of IN.
file(READ ${IN} text)
string(FIND "${text}" ")kcache_yaml\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw string's end marker")
endif()
file(WRITE ${OUT} "// Written by engine/cache_dirs/embed_table.cmake from cache_dirs.yaml.\n"
  "#include \"engine/cache_dirs/cache_dirs_yaml.h\"\n\n"
  "namespace kcache::cache_dirs {\n\nconst char kCacheDirsYaml[] = R\"kcache_yaml(${text})kcache_yaml\";\n\n}\n")
