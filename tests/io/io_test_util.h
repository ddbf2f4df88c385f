// Helpers for the io tests: temporary directories and safetensors images built byte by byte, so
// malformed files can be written as easily as valid ones.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::io_test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagoda_io_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// 8-byte length + header text (space-padded to a multiple of 8, as the safetensors writer does,
// so data offsets stay aligned) + data.
inline std::string image(std::string header, const std::string& data) {
  while ((8 + header.size()) % 8 != 0) header += ' ';
  return u64_le(header.size()) + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// One tensor of a valid image; the builder lays tensors out back to back in the given order.
struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};

inline std::string build(const std::vector<Tensor>& tensors, const nlohmann::ordered_json& meta =
                                                                 nlohmann::ordered_json()) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!meta.is_null()) header["__metadata__"] = meta;
  std::string data;
  for (const Tensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data += t.data;
  }
  return image(header.dump(), data);
}

inline ::testing::AssertionResult contains(const std::string& text, const std::string& sub) {
  if (text.find(sub) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message\n  " << text << "\ndoes not contain\n  " << sub;
}

// The message of the pagoda::Error that `f` throws; a test failure when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const pagoda::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a pagoda::Error";
  return "";
}

}  // namespace pagoda::io_test
