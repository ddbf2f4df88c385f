// Shared by the media tests: the vision fixture's directory (its images and transformers' pixel
// tensors) and a file's bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/build_paths.h"

namespace pagoda::media_test {

inline std::string fixture_dir() {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/vision/qwen3_5-tiny-vision";
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace pagoda::media_test
