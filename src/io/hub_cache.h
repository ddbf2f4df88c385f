// Hugging Face's cache layout, as huggingface_hub lays it out (and so vLLM reads it): a model
// `org/name` lives in <root>/models--org--name/; refs/<revision> holds the commit that a branch or
// tag named; snapshots/<commit>/ holds that commit's files. pagoda reads caches huggingface_hub
// filled and fills its own the same way, so either finds what the other downloaded.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace pagoda::hub {

// "org/name" as the Hub spells a repository: two parts of letters, digits, '-', '_', '.', none
// starting with '.' or '-'. A path such as ./model or /data/m never matches.
bool looks_like_repo_id(const std::string& text);

// A branch, tag or commit: letters, digits and -_./ with no ".." part and no leading '/', at most
// 256 characters (it becomes a path below refs/ and a URL segment).
bool is_valid_revision(const std::string& revision);

// Forty hex digits: a commit, which names its snapshot directly.
bool is_commit_hash(const std::string& text);

// HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (huggingface_hub's constants.py).
std::filesystem::path default_cache_root();

// <root>/models--org--name
std::filesystem::path repo_folder(const std::filesystem::path& root, const std::string& repo_id);

// The commit `revision` stands for in the cache: itself when it is a commit hash, else the
// content of refs/<revision>; nullopt when the cache does not know the revision.
std::optional<std::string> cached_commit(const std::filesystem::path& repo_dir, const std::string& revision);

// The snapshot directory of `revision` when it holds a whole model: config.json and its
// safetensors (every shard model.safetensors.index.json names), no download left unfinished.
std::optional<std::filesystem::path> cached_model(const std::filesystem::path& root, const std::string& repo_id,
                                                  const std::string& revision);

// Records that `revision` (a branch or tag) pointed at `commit`: refs/<revision>.
void write_ref(const std::filesystem::path& repo_dir, const std::string& revision, const std::string& commit);

}  // namespace pagoda::hub
