#include "io/text_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"

namespace pagoda {

std::string read_text_file(const std::string& path, size_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  check(!ec && fs::exists(st), "cannot read " + path + ": no such file");
  check(!fs::is_directory(st), path + " is a directory, expected a file");
  const auto size = fs::file_size(path, ec);
  check(!ec, "cannot read the size of " + path + ": " + ec.message());
  check(size <= max_bytes, path + " is " + std::to_string(size) + " bytes, over the " +
                               std::to_string(max_bytes) + "-byte limit for this kind of file");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open " + path + " for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check(!in.bad(), "error while reading " + path);
  return text;
}

}  // namespace pagoda
