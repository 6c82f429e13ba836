// Where the tests find the source and build folders: read from a small compiled file
// (paths.cpp), not baked into every test, so that a test's object file is the same in every
// clone and ccache serves it (tests/CMakeLists.txt includes this header in every test).
#pragma once

namespace trackd::test {
const char* source_dir();  // the repository
const char* binary_dir();  // the CMake build folder of this preset
}  // namespace trackd::test

#define TRACKD_SOURCE_DIR ::trackd::test::source_dir()
#define TRACKD_BINARY_DIR ::trackd::test::binary_dir()
