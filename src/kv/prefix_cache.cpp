#include "kv/prefix_cache.h"

#include <algorithm>
#include <stdexcept>

#include "core/error.h"

namespace pagoda {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_salt(const std::string& salt) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : salt) h = (h ^ c) * 0x100000001b3ULL;
  return mix64(h ^ salt.size());
}

}  // namespace

PrefixCache::PrefixCache(int32_t num_blocks, int32_t block_size, int32_t num_snapshots, int hash_bits)
    : block_size_(block_size),
      mask_(hash_bits >= 64 ? ~0ULL : ((1ULL << std::max(hash_bits, 1)) - 1)),
      entries_(static_cast<size_t>(std::max(num_blocks, 0))),
      generation_(static_cast<size_t>(std::max(num_blocks, 0)), 0),
      snap_block_(static_cast<size_t>(std::max(num_snapshots, 0)), -1),
      snap_last_use_(static_cast<size_t>(std::max(num_snapshots, 0)), 0) {
  check(block_size >= 1, "prefix cache: block_size must be >= 1");
}

uint64_t PrefixCache::chain_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) const {
  uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL) ^ extra;
  for (int32_t t : tokens) h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) * 0xff51afd7ed558ccdULL));
  return h & mask_;
}

void PrefixCache::extend_hashes(std::span<const int32_t> tokens, const std::string& salt,
                                std::vector<uint64_t>& hashes) const {
  const size_t full = tokens.size() / static_cast<size_t>(block_size_);
  if (hashes.size() >= full) return;
  const uint64_t extra = hash_salt(salt);
  const auto bs = static_cast<size_t>(block_size_);
  for (size_t i = hashes.size(); i < full; ++i) {
    const uint64_t parent = i == 0 ? 0 : hashes[i - 1];
    hashes.push_back(chain_hash(parent, tokens.subspan(i * bs, bs), extra));
  }
}

int32_t PrefixCache::find(uint64_t hash, int32_t parent, std::span<const int32_t> tokens,
                          const std::string& salt) const {
  auto [lo, hi] = index_.equal_range(hash);
  for (auto it = lo; it != hi; ++it) {
    const Entry& e = entries_[static_cast<size_t>(it->second)];
    if (e.parent != parent) continue;
    if (parent >= 0 ? e.parent_generation != generation_[static_cast<size_t>(parent)] : e.salt != salt) continue;
    if (!std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) continue;
    return it->second;
  }
  return -1;
}

std::vector<int32_t> PrefixCache::match(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                                        const std::string& salt, int32_t max_blocks, bool need_snapshot,
                                        int32_t* snapshot, int32_t* kv_blocks) const {
  std::vector<int32_t> run;
  const auto bs = static_cast<size_t>(block_size_);
  const size_t limit = std::min({static_cast<size_t>(std::max(max_blocks, 0)), hashes.size(), tokens.size() / bs});
  size_t deepest = 0;  // run length up to the deepest block with a snapshot
  int32_t deepest_snapshot = -1;
  for (size_t i = 0; i < limit; ++i) {
    const int32_t parent = i == 0 ? -1 : run.back();
    const int32_t b = find(hashes[i], parent, tokens.subspan(i * bs, bs), salt);
    if (b < 0) break;
    run.push_back(b);
    if (entries_[static_cast<size_t>(b)].snapshot >= 0) {
      deepest = run.size();
      deepest_snapshot = entries_[static_cast<size_t>(b)].snapshot;
    }
  }
  if (kv_blocks != nullptr) *kv_blocks = static_cast<int32_t>(run.size());
  if (need_snapshot) run.resize(deepest);
  if (snapshot != nullptr) *snapshot = need_snapshot ? deepest_snapshot : -1;
  return run;
}

int32_t PrefixCache::insert(int32_t block, int32_t parent, int32_t index, std::span<const int32_t> tokens,
                            uint64_t hash, const std::string& salt, std::optional<uint64_t> parent_hash) {
  const auto bs = static_cast<size_t>(block_size_);
  const std::span<const int32_t> mine = tokens.subspan(static_cast<size_t>(index) * bs, bs);
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.cached) throw std::logic_error("PrefixCache::insert: block is already cached");
  if (const int32_t existing = find(hash, parent, mine, salt); existing >= 0) return existing;
  e.cached = true;
  e.hash = hash;
  e.parent = parent;
  e.parent_generation = parent >= 0 ? generation_[static_cast<size_t>(parent)] : 0;
  e.tokens.assign(mine.begin(), mine.end());
  e.salt = parent >= 0 ? std::string() : salt;
  e.snapshot = -1;
  // Events name blocks by hash, so a hash is told once while any block holds it: a second block of
  // the same chain (computed again after its first copy's parent was evicted, which makes the
  // first unmatchable) adds nothing a router could use.
  const bool new_hash = index_.count(hash) == 0;
  num_hashes_ += new_hash ? 1 : 0;
  if (events_ && new_hash)
    events_->stored(hash, index > 0 ? parent_hash : std::nullopt, e.tokens);
  index_.emplace(hash, block);
  ++num_cached_;
  return block;
}

void PrefixCache::forget(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (!e.cached) return;
  auto [lo, hi] = index_.equal_range(e.hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second == block) {
      index_.erase(it);
      break;
    }
  if (e.snapshot >= 0) snap_block_[static_cast<size_t>(e.snapshot)] = -1;
  if (index_.count(e.hash) == 0) {
    --num_hashes_;
    if (events_) events_->removed(e.hash);
  }
  e = Entry();
  ++generation_[static_cast<size_t>(block)];  // children that name it as parent no longer match
  --num_cached_;
}

int32_t PrefixCache::reserve_snapshot() {
  int32_t pick = -1;
  for (size_t s = 0; s < snap_block_.size(); ++s) {
    if (snap_block_[s] == -1) {
      pick = static_cast<int32_t>(s);
      break;
    }
    if (snap_block_[s] >= 0 && (pick < 0 || snap_last_use_[s] < snap_last_use_[static_cast<size_t>(pick)]))
      pick = static_cast<int32_t>(s);
  }
  if (pick < 0) return -1;
  unbind(pick);
  snap_block_[static_cast<size_t>(pick)] = kReserved;
  return pick;
}

void PrefixCache::unbind(int32_t snapshot) {
  const int32_t b = snap_block_[static_cast<size_t>(snapshot)];
  if (b >= 0) entries_[static_cast<size_t>(b)].snapshot = -1;
  snap_block_[static_cast<size_t>(snapshot)] = -1;
}

void PrefixCache::bind_snapshot(int32_t snapshot, int32_t block) {
  if (snap_block_.at(static_cast<size_t>(snapshot)) != kReserved)
    throw std::logic_error("PrefixCache::bind_snapshot: snapshot is not reserved");
  Entry& e = entries_[static_cast<size_t>(block)];
  if (!e.cached || e.snapshot >= 0) {
    snap_block_[static_cast<size_t>(snapshot)] = -1;
    if (e.snapshot >= 0) touch_snapshot(e.snapshot);
    return;
  }
  e.snapshot = snapshot;
  snap_block_[static_cast<size_t>(snapshot)] = block;
  touch_snapshot(snapshot);
}

void PrefixCache::release_snapshot(int32_t snapshot) {
  if (snap_block_.at(static_cast<size_t>(snapshot)) != kReserved)
    throw std::logic_error("PrefixCache::release_snapshot: snapshot is not reserved");
  snap_block_[static_cast<size_t>(snapshot)] = -1;
}

void PrefixCache::touch_snapshot(int32_t snapshot) { snap_last_use_.at(static_cast<size_t>(snapshot)) = ++clock_; }

int32_t PrefixCache::num_bound_snapshots() const {
  return static_cast<int32_t>(std::count_if(snap_block_.begin(), snap_block_.end(), [](int32_t b) { return b >= 0; }));
}

int32_t PrefixCache::num_reserved_snapshots() const {
  return static_cast<int32_t>(std::count(snap_block_.begin(), snap_block_.end(), kReserved));
}

}  // namespace pagoda
