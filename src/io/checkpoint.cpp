// A checkpoint directory: one model.safetensors, or shards named by model.safetensors.index.json.
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/text_file.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kMaxIndexBytes = 100u * 1000 * 1000;
const char* const kIndexName = "model.safetensors.index.json";
const char* const kSingleName = "model.safetensors";

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// A shard must be a plain file name inside the checkpoint directory: the index is outside input
// and must not make us open files elsewhere.
void check_shard_name(const std::string& shard, const std::string& tensor,
                      const std::string& index_path) {
  const bool plain = !shard.empty() && shard != "." && shard != ".." &&
                     shard.find('/') == std::string::npos &&
                     shard.find('\\') == std::string::npos &&
                     shard.find('\0') == std::string::npos;
  check(plain, index_path + ": tensor " + in_quotes(tensor) + " maps to shard " + in_quotes(shard) +
                   ", which is not a file name inside the checkpoint directory");
}

// weight_map {tensor: shard} of the index, each value checked to be a plain shard name.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const json index = json::parse(read_text_file(index_path, kMaxIndexBytes), nullptr, false);
  check(!index.is_discarded(), index_path + " is not valid JSON; re-download the checkpoint");
  check(index.is_object(), index_path + " is not a JSON object");
  auto it = index.find("weight_map");
  check(it != index.end() && it->is_object(),
        index_path + " has no weight_map object {tensor name: shard file}");
  std::map<std::string, std::string> map;
  for (const auto& [tensor, shard] : it->items()) {
    check(shard.is_string(), index_path + ": weight_map entry for " + in_quotes(tensor) +
                                 " is not a shard file name");
    const std::string name = shard.get<std::string>();
    check_shard_name(name, tensor, index_path);
    map.emplace(tensor, name);
  }
  check(!map.empty(), index_path + ": weight_map is empty");
  return map;
}

using ShardMap = std::map<std::string, std::shared_ptr<SafetensorsFile>>;

// Every tensor the index names must be in the shard it names: a stale index means the shards are
// from another save, and loading them would mix weights.
void check_index_matches(const std::map<std::string, std::string>& weight_map,
                         const ShardMap& shards, const std::string& index_path) {
  std::map<std::string, std::set<std::string>> names_in;
  for (const auto& [shard, file] : shards) {
    for (const TensorView& t : file->tensors()) names_in[shard].insert(t.name);
  }
  for (const auto& [tensor, shard] : weight_map) {
    check(names_in[shard].count(tensor) != 0,
          index_path + " lists tensor " + in_quotes(tensor) + " in " + shard + ", but " + shard +
              " does not contain it; the index and the shards are from different saves");
  }
}

}  // namespace

void Checkpoint::add_file(std::shared_ptr<SafetensorsFile> file) {
  for (const TensorView& t : file->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted) {
      throw Error("tensor " + in_quotes(t.name) + " is in both " + file->path() + " and another " +
                  "shard of " + dir_ + "; the checkpoint is inconsistent");
    }
  }
  files_.push_back(std::move(file));
}

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  std::error_code ec;
  check(fs::is_directory(dir, ec), "checkpoint directory " + dir + " does not exist or is not a " +
                                       "directory");
  const std::string index_path = (fs::path(dir) / kIndexName).string();
  const std::string single_path = (fs::path(dir) / kSingleName).string();
  if (fs::exists(index_path, ec)) {
    const auto weight_map = read_weight_map(index_path);
    ShardMap shards;
    for (const auto& [tensor, shard] : weight_map) {
      if (shards.count(shard)) continue;
      const std::string shard_path = (fs::path(dir) / shard).string();
      check(fs::exists(shard_path, ec), index_path + " lists shard " + shard + " (for tensor " +
                                            in_quotes(tensor) + ") but " + shard_path +
                                            " does not exist; the download is incomplete");
      shards.emplace(shard, SafetensorsFile::open(shard_path));
    }
    for (auto& [name, file] : shards) ckpt.add_file(file);
    check_index_matches(weight_map, shards, index_path);
  } else if (fs::exists(single_path, ec)) {
    ckpt.add_file(SafetensorsFile::open(single_path));
  } else {
    throw Error("no checkpoint in " + dir + ": looked for " + index_path + " and " + single_path);
  }
  for (const auto& [name, view] : ckpt.by_name_) ckpt.all_.push_back(view);
  return ckpt;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorView& Checkpoint::get(const std::string& name) const {
  const TensorView* t = find(name);
  check(t != nullptr, "tensor " + in_quotes(name) + " is not in the checkpoint " + dir_ + " (" +
                          std::to_string(by_name_.size()) +
                          " tensors); the checkpoint does not match the model config");
  return *t;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const TensorView* t : all_) total += t->nbytes;
  return total;
}

}  // namespace pagoda
