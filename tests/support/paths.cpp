#include "support/paths.hpp"

namespace trackd::test {
const char* source_dir() { return TRACKD_SOURCE_PATH; }
const char* binary_dir() { return TRACKD_BINARY_PATH; }
}  // namespace trackd::test
