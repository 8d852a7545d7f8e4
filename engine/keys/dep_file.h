// The make-style dependency file a compiler writes (-MD, -MF; nvcc's and gcc's spellings):
// parsing it into targets and prerequisites, and writing it back.
#ifndef KCACHE_ENGINE_KEYS_DEP_FILE_H_
#define KCACHE_ENGINE_KEYS_DEP_FILE_H_

#include <string>
#include <vector>

namespace kcache::objects {

// A make-style dependency file: its targets and its prerequisites, unescaped.
struct DepFile {
  std::vector<std::string> targets;
  std::vector<std::string> deps;
};
DepFile ParseDepFile(const std::string& text);
std::string WriteDepFile(const DepFile& deps);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_DEP_FILE_H_
