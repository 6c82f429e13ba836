// trackd's own version and the schema version this build expects.
#pragma once

#include <string_view>

namespace trackd::core {

std::string_view version() noexcept;

}  // namespace trackd::core
