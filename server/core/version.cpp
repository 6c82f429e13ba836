#include "trackd/core/version.hpp"

#ifndef TRACKD_VERSION
#error "TRACKD_VERSION must be defined by the build"
#endif

namespace trackd::core {

std::string_view version() noexcept { return TRACKD_VERSION; }

}  // namespace trackd::core
