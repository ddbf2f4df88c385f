// Memory-mapped safetensors checkpoints: one file, or several shards named by
// model.safetensors.index.json. The header is outside input and is checked before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace pagoda {

// One tensor inside a mapped file. `data` points into the mapping, lives as long as the file and is
// aligned to the element size (parse() rejects misaligned tensors).
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  // True when `data` lies in a read-only file mapping (SafetensorsFile::open), false for an
  // in-memory image (parse()): only mapped pages may be dropped and read from the file again.
  bool file_backed = false;

  int64_t numel() const;
};

class MappedFile;  // RAII mmap of a whole file (read-only)

// A single .safetensors file. open() throws pagoda::Error with the path and what is wrong.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzzer and tests); `bytes` must outlive the object.
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t* bytes, size_t size,
                                                const std::string& label);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // in header order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> map_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a checkpoint directory: model.safetensors, or the shards listed by
// model.safetensors.index.json (each shard opened once; the index must agree with the shards).
class Checkpoint {
 public:
  static Checkpoint open_dir(const std::string& dir);

  const TensorView* find(const std::string& name) const;  // nullptr when absent
  const TensorView& get(const std::string& name) const;   // throws naming the tensor when absent
  const std::vector<const TensorView*>& all() const { return all_; }  // sorted by name
  size_t total_bytes() const;
  const std::string& dir() const { return dir_; }

 private:
  void add_file(std::shared_ptr<SafetensorsFile> file);

  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> by_name_;
  std::vector<const TensorView*> all_;
};

}  // namespace pagoda
