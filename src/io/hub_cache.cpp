#include "io/hub_cache.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::hub {
namespace fs = std::filesystem;
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.';
}

bool is_repo_part(const std::string& part) {
  if (part.empty() || part.size() > 96 || part.front() == '.' || part.front() == '-') return false;
  if (part.find("..") != std::string::npos) return false;
  for (char c : part)
    if (!is_name_char(c)) return false;
  return true;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A cache file pagoda reads (a ref, a shard index): small, or not what it should be.
std::optional<std::string> read_small(const fs::path& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size > max_bytes) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool looks_like_repo_id(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos) return false;
  return is_repo_part(text.substr(0, slash)) && is_repo_part(text.substr(slash + 1));
}

bool is_valid_revision(const std::string& revision) {
  if (revision.empty() || revision.size() > 256 || revision.front() == '/' || revision.back() == '/') return false;
  for (char c : revision)
    if (!is_name_char(c) && c != '/') return false;
  std::stringstream parts(revision);
  for (std::string part; std::getline(parts, part, '/');)
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

bool is_commit_hash(const std::string& text) {
  if (text.size() != 40) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

fs::path default_cache_root() {
  if (const std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (const std::string v = env("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  if (const std::string v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "huggingface" / "hub";
  const std::string home = env("HOME");
  check(!home.empty(), "cannot find the Hugging Face cache: HOME is not set; set HF_HUB_CACHE or HF_HOME");
  return fs::path(home) / ".cache" / "huggingface" / "hub";
}

fs::path repo_folder(const fs::path& root, const std::string& repo_id) {
  std::string name = "models--" + repo_id;
  const size_t slash = name.find('/');
  if (slash != std::string::npos) name.replace(slash, 1, "--");
  return root / name;
}

std::optional<std::string> cached_commit(const fs::path& repo_dir, const std::string& revision) {
  if (is_commit_hash(revision)) return revision;
  if (!is_valid_revision(revision)) return std::nullopt;
  auto text = read_small(repo_dir / "refs" / revision, 256);
  if (!text) return std::nullopt;
  while (!text->empty() && std::isspace(static_cast<unsigned char>(text->back()))) text->pop_back();
  if (!is_commit_hash(*text)) return std::nullopt;
  return text;
}

std::optional<fs::path> cached_model(const fs::path& root, const std::string& repo_id, const std::string& revision) {
  const fs::path repo_dir = repo_folder(root, repo_id);
  const auto commit = cached_commit(repo_dir, revision);
  if (!commit) return std::nullopt;
  const fs::path dir = repo_dir / "snapshots" / *commit;
  std::error_code ec;
  if (!fs::is_regular_file(dir / "config.json", ec)) return std::nullopt;
  bool any_weights = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".incomplete")) return std::nullopt;  // a download that was cut
    if (name.ends_with(".safetensors")) any_weights = true;
  }
  if (ec || !any_weights) return std::nullopt;
  // A sharded checkpoint is whole only with every shard its index names.
  if (fs::exists(dir / "model.safetensors.index.json", ec)) {
    const auto text = read_small(dir / "model.safetensors.index.json", 64u << 20);
    if (!text) return std::nullopt;
    const auto index = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) return std::nullopt;
    for (const auto& shard : index["weight_map"]) {
      if (!shard.is_string()) return std::nullopt;
      const std::string file = shard.get<std::string>();
      if (file.find('/') != std::string::npos || !fs::is_regular_file(dir / file, ec)) return std::nullopt;
    }
  }
  return dir;
}

void write_ref(const fs::path& repo_dir, const std::string& revision, const std::string& commit) {
  if (is_commit_hash(revision)) return;  // a commit needs no ref
  const fs::path ref = repo_dir / "refs" / revision;
  fs::create_directories(ref.parent_path());
  const fs::path tmp = ref.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    check(static_cast<bool>(out), "cannot write " + tmp.string() + "; check that the cache directory is writable");
  }
  fs::rename(tmp, ref);
}

}  // namespace pagoda::hub
