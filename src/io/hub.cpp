#include "io/hub.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hub_cache.h"
#include "io/hub_http.h"

namespace pagoda::hub {
namespace fs = std::filesystem;
namespace {

// The model-info answer lists every file of the repository; a few megabytes for the largest.
constexpr size_t kMaxModelInfoBytes = 16u << 20;
constexpr size_t kMaxFiles = 100000;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool env_true(const char* name) {
  std::string v = env(name);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string token_from_file() {
  std::string path = env("HF_TOKEN_PATH");
  if (path.empty()) {
    const std::string home = env("HF_HOME");
    if (!home.empty()) path = home + "/token";
    else if (!env("XDG_CACHE_HOME").empty()) path = env("XDG_CACHE_HOME") + "/huggingface/token";
    else if (!env("HOME").empty()) path = env("HOME") + "/.cache/huggingface/token";
  }
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec) || fs::file_size(path, ec) > 4096) return "";
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return token;
}

// Percent-encodes all but RFC 3986's unreserved characters: a revision such as refs/pr/1 is one
// URL segment, as huggingface_hub sends it.
std::string url_segment(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A name from the Hub's file list becomes a path under the snapshot: nothing that could leave it.
bool is_safe_relative_name(const std::string& name) {
  if (name.empty() || name.size() > 1024 || name.front() == '/' || name.find('\\') != std::string::npos) return false;
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f) return false;
  std::stringstream parts(name);
  for (std::string part; std::getline(parts, part, '/');)
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

std::string access_advice(const HubOptions& o) {
  return o.token.empty() ? "set HF_TOKEN (gated or private model; for a gated one, accept its terms on its Hub page "
                           "first), or check the name"
                         : "the token in HF_TOKEN has no access to it: accept the model's terms on its Hub page, or "
                           "use a token that can read it";
}

[[noreturn]] void explain(const HttpStatusError& e, const std::string& repo_id, const HubOptions& o,
                          const std::string& what) {
  if (e.status == 401 || e.status == 403)
    throw Error(repo_id + ": the Hub refused access (HTTP " + std::to_string(e.status) + " from " + e.url + "); " +
                access_advice(o));
  if (e.status == 404)
    throw Error(repo_id + ": " + what + " (HTTP 404 from " + e.url + "); check the model id and --revision '" +
                o.revision + "'");
  throw Error(repo_id + ": HTTP " + std::to_string(e.status) + " from " + e.url +
              "; try again later, or check HF_ENDPOINT");
}

struct RepoListing {
  std::string commit;
  std::vector<std::string> files;  // the ones pagoda loads, small ones first, the weights last
};

RepoListing list_repo(const std::string& repo_id, const HubOptions& o) {
  const std::string url = o.endpoint + "/api/models/" + repo_id + "/revision/" + url_segment(o.revision);
  std::string text;
  try {
    text = http_get_text(url, HttpAuth{o.token}, kMaxModelInfoBytes);
  } catch (const HttpStatusError& e) {
    explain(e, repo_id, o, "no such model or revision");
  }
  const auto info = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string bad = "the Hub's answer for " + repo_id + " (" + url + ") is not a model's description";
  check(info.is_object(), bad + ": not a JSON object; check HF_ENDPOINT");
  check(info.contains("sha") && info["sha"].is_string() && is_commit_hash(info["sha"].get<std::string>()),
        bad + ": no commit hash in \"sha\"; check HF_ENDPOINT");
  check(info.contains("siblings") && info["siblings"].is_array() && info["siblings"].size() <= kMaxFiles,
        bad + ": no file list in \"siblings\"; check HF_ENDPOINT");
  RepoListing listing;
  listing.commit = info["sha"].get<std::string>();
  for (const auto& sibling : info["siblings"]) {
    if (!sibling.is_object() || !sibling.contains("rfilename") || !sibling["rfilename"].is_string()) continue;
    const std::string name = sibling["rfilename"].get<std::string>();
    check(is_safe_relative_name(name), "the Hub's file list for " + repo_id + " names '" + name +
                                           "', a path outside the model's directory; refusing to download from " +
                                           o.endpoint + " (check HF_ENDPOINT)");
    if (is_model_file(name)) listing.files.push_back(name);
  }
  const auto has = [&listing](const std::string& name) {
    return std::find(listing.files.begin(), listing.files.end(), name) != listing.files.end();
  };
  check(has("config.json"), repo_id + " (revision " + o.revision + ") has no config.json: it is not a model pagoda "
                            "can load");
  check(std::any_of(listing.files.begin(), listing.files.end(),
                    [](const std::string& f) { return f.ends_with(".safetensors"); }),
        repo_id + " (revision " + o.revision + ") has no *.safetensors weights; pagoda loads safetensors "
        "checkpoints only (convert .bin/.pt weights, or pick a repository that has safetensors)");
  // The weights last: a snapshot with config.json and its safetensors is whole (hub_cache.h).
  std::stable_partition(listing.files.begin(), listing.files.end(),
                        [](const std::string& f) { return !f.ends_with(".safetensors"); });
  return listing;
}

}  // namespace

HubOptions hub_options_from_env(const std::string& revision, const std::string& download_dir,
                                const std::string& token) {
  HubOptions o;
  o.revision = revision.empty() ? "main" : revision;
  o.cache_root = download_dir.empty() ? default_cache_root() : fs::path(download_dir);
  o.endpoint = env("HF_ENDPOINT");
  if (o.endpoint.empty()) o.endpoint = "https://huggingface.co";
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  o.token = token;
  if (o.token.empty()) o.token = env("HF_TOKEN");
  if (o.token.empty()) o.token = env("HUGGING_FACE_HUB_TOKEN");
  if (o.token.empty()) o.token = token_from_file();
  o.offline = env_true("HF_HUB_OFFLINE");
  return o;
}

bool is_model_file(const std::string& name) {
  static const char* const kFiles[] = {"config.json",         "generation_config.json", "tokenizer.json",
                                       "tokenizer_config.json", "chat_template.jinja",  "chat_template.json",
                                       "model.safetensors.index.json"};
  if (name.find('/') != std::string::npos) return false;  // the model's own directory only
  for (const char* f : kFiles)
    if (name == f) return true;
  return name.size() > 12 && name.ends_with(".safetensors");
}

fs::path resolve_hub_model(const std::string& repo_id, const HubOptions& o) {
  check(looks_like_repo_id(repo_id), "'" + repo_id + "' is neither a model directory nor a Hugging Face model id "
                                     "(org/name)");
  check(is_valid_revision(o.revision), "--revision '" + o.revision + "' is not a branch, tag or commit name");
  if (auto dir = cached_model(o.cache_root, repo_id, o.revision)) {
    std::fprintf(stderr, "[pagoda] %s (revision %s): from the Hugging Face cache, %s\n", repo_id.c_str(),
                 o.revision.c_str(), dir->c_str());
    return *dir;
  }
  check(!o.offline, "HF_HUB_OFFLINE is set and " + repo_id + " (revision " + o.revision + ") is not in the cache at " +
                        o.cache_root.string() + "; download it once without HF_HUB_OFFLINE, or pass a model directory");
  const RepoListing listing = list_repo(repo_id, o);
  const fs::path repo_dir = repo_folder(o.cache_root, repo_id);
  const fs::path dir = repo_dir / "snapshots" / listing.commit;
  try {
    fs::create_directories(dir);
  } catch (const fs::filesystem_error& e) {
    throw Error("cannot create " + dir.string() + ": " + e.code().message() +
                "; pass --download-dir DIR, or set HF_HUB_CACHE to a writable directory");
  }
  write_ref(repo_dir, o.revision, listing.commit);
  std::fprintf(stderr, "[pagoda] %s (revision %s, commit %s): downloading %zu files from %s into %s\n",
               repo_id.c_str(), o.revision.c_str(), listing.commit.c_str(), listing.files.size(), o.endpoint.c_str(),
               dir.c_str());
  for (const std::string& file : listing.files) {
    if (fs::exists(dir / file)) continue;  // a file of an earlier, cut download
    // The commit, not the branch: every file of one snapshot, even if the branch moves meanwhile.
    const std::string url =
        o.endpoint + "/" + repo_id + "/resolve/" + listing.commit + "/" + url_segment(file);
    try {
      http_download(url, HttpAuth{o.token}, dir / file, file);
    } catch (const HttpStatusError& e) {
      explain(e, repo_id, o, "the Hub lists " + file + " but does not serve it");
    }
  }
  const auto whole = cached_model(o.cache_root, repo_id, listing.commit);
  check(whole.has_value(), repo_id + ": the download into " + dir.string() + " is not a whole model (a shard that "
                           "model.safetensors.index.json names is missing from the repository)");
  return *whole;
}

}  // namespace pagoda::hub
