#include "daemon/cache/unknown_driver.h"

#include "core/load_check.h"
#include "engine/resolve/decide.h"

namespace kcache {

std::optional<Answer> CarryToDriver(const Answer& unknown, const Device& device) {
  if (device.driver == 0 || unknown.artifact == nullptr) return std::nullopt;
  if (unknown.rule != ServeRule::kExactSass && unknown.rule != ServeRule::kCompatibleSass) {
    return std::nullopt;
  }
  const ArtifactMeta& meta = unknown.artifact->meta;
  if (!DriverLoads(device.driver, meta.min_driver)) return std::nullopt;
  return Answer{unknown.artifact, unknown.rule, ServeReason(unknown.rule, meta, device)};
}

}  // namespace kcache
