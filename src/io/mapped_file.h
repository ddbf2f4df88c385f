// Read-only memory mapping of a whole file, unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pagoda {

class MappedFile {
 public:
  // Throws pagoda::Error naming `path` when it is missing, not a regular file, empty or unreadable.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pagoda
