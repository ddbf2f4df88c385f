// Where this build's source tree and pagoda binary are: the default model (models/) when the binary
// runs from a build tree, and the test data and binary the tests use. Defined in one file that
// CMake generates (build/generated/build_paths.cpp), so that no other object depends on the path of
// the clone it was built in and a compiler cache serves every clone.
#pragma once

namespace pagoda::build_paths {
extern const char* const kSourceDir;
extern const char* const kBinary;  // the pagoda executable
}  // namespace pagoda::build_paths

#define PAGODA_SOURCE_DIR (::pagoda::build_paths::kSourceDir)
#define PAGODA_BINARY (::pagoda::build_paths::kBinary)
