#include "pause_point.hpp"

#include "trackd/core/pause_point.hpp"

namespace trackd::archive {

void pause_point(const char* name) {
    static core::PausePoint point("TRACKD_TEST_ARCHIVE_PAUSE_AT", "archive");
    point.at(name);
}

}  // namespace trackd::archive
