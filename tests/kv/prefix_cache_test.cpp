// The prefix cache's bookkeeping (kv/prefix_cache.h, kv/kv_cache_manager.h): which runs of blocks
// match, what is shared, what is evicted and when, and that a hash collision never passes for a
// hit. The engine-level tests (tests/engine/prefix_caching_test.cpp) check the tokens.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/prefix_cache.h"

namespace pagoda {
namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence's life in the manager: a hit, its new tokens, then every full block registered.
struct Seq {
  int64_t id;
  std::vector<int32_t> tokens;
  std::string salt;
  std::vector<uint64_t> hashes;
};

std::vector<int32_t> admit(KvCacheManager& kv, Seq& s, bool need_snapshot = false, int32_t* snapshot = nullptr) {
  PrefixCache& c = *kv.prefix_cache();
  c.extend_hashes(s.tokens, s.salt, s.hashes);
  const auto max_blocks = static_cast<int32_t>((s.tokens.size() - 1) / kBs);
  std::vector<int32_t> hit = c.match(s.tokens, s.hashes, s.salt, max_blocks, need_snapshot, snapshot);
  kv.adopt_prefix(s.id, hit);
  const auto cached = static_cast<int32_t>(hit.size()) * kBs;
  EXPECT_TRUE(kv.append_slots(s.id, static_cast<int32_t>(s.tokens.size()) - cached));
  kv.cache_full_blocks(s.id, s.tokens, s.hashes, s.salt, static_cast<int32_t>(s.tokens.size()));
  return hit;
}

TEST(PrefixCache, HashesChainOverTheWholePrefixAndTheSalt) {
  PrefixCache c(8, kBs, 0);
  std::vector<uint64_t> a, b, salted;
  std::vector<int32_t> t = iota_tokens(12);
  c.extend_hashes(t, "", a);
  ASSERT_EQ(a.size(), 3u);  // full blocks only
  std::vector<int32_t> u = t;
  u[0] = 99;  // same blocks 1 and 2, different first block
  c.extend_hashes(u, "", b);
  EXPECT_NE(a[1], b[1]);
  EXPECT_NE(a[2], b[2]);
  c.extend_hashes(t, "tenant-a", salted);
  EXPECT_NE(a[0], salted[0]);
  std::vector<uint64_t> again;
  c.extend_hashes(std::span<const int32_t>(t).first(9), "", again);  // 2 full blocks, then extended
  c.extend_hashes(t, "", again);
  EXPECT_EQ(again, a);
}

TEST(PrefixCache, LongestRunOfFullBlocksNeverTheLastToken) {
  KvCacheManager kv(16, kBs, true, 0);
  Seq a{1, iota_tokens(10)};  // 2 full blocks + a partial one
  EXPECT_TRUE(admit(kv, a).empty());
  EXPECT_EQ(kv.prefix_cache()->num_cached_blocks(), 2);  // the partial block is not shared

  Seq b{2, iota_tokens(14)};  // extends a: its first two blocks hit
  std::vector<int32_t> hit = admit(kv, b);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0], kv.block_table(1)[0]);
  EXPECT_EQ(hit[1], kv.block_table(1)[1]);
  EXPECT_EQ(kv.pool().ref_count(hit[0]), 2);

  Seq c{3, iota_tokens(8)};  // exactly a's two blocks: the last token must be computed, so one
  EXPECT_EQ(admit(kv, c).size(), 1u);

  Seq d{4, iota_tokens(14)};
  d.tokens[5] = 500;  // differs inside block 1
  EXPECT_EQ(admit(kv, d).size(), 1u);
}

TEST(PrefixCache, DifferentSaltsNeverShare) {
  KvCacheManager kv(16, kBs, true, 0);
  Seq a{1, iota_tokens(9), "alice"};
  admit(kv, a);
  Seq b{2, iota_tokens(9), "bob"};
  EXPECT_TRUE(admit(kv, b).empty());
  Seq none{3, iota_tokens(9), ""};
  EXPECT_TRUE(admit(kv, none).empty());
  Seq alice{4, iota_tokens(9), "alice"};
  EXPECT_EQ(admit(kv, alice).size(), 2u);
}

TEST(PrefixCache, CollidingHashesAreToldApartByTheirTokens) {
  // One hash bit: every block collides with about half of the others.
  KvCacheManager kv(64, kBs, true, 0, /*hash_bits=*/1);
  std::vector<Seq> seqs;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> t = iota_tokens(12, 1 + 100 * i);
    seqs.push_back({i, t});
  }
  for (Seq& s : seqs) EXPECT_TRUE(admit(kv, s).empty()) << "sequence " << s.id;
  // Same tokens as sequence 3: hits exactly its blocks.
  Seq again{100, iota_tokens(13, 301)};
  std::vector<int32_t> hit = admit(kv, again);
  ASSERT_EQ(hit.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(hit[i], kv.block_table(3)[i]);
  // Block 1 of sequence 5 after block 0 of sequence 4: no run, although both blocks are cached.
  std::vector<int32_t> mixed = iota_tokens(4, 401);
  std::vector<int32_t> b1 = iota_tokens(5, 505);
  mixed.insert(mixed.end(), b1.begin(), b1.end());
  Seq m{101, mixed};
  EXPECT_EQ(admit(kv, m).size(), 1u);
}

TEST(PrefixCache, FreedCachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  KvCacheManager kv(6, kBs, true, 0);
  Seq a{1, iota_tokens(8, 1)}, b{2, iota_tokens(8, 101)};
  admit(kv, a);
  admit(kv, b);
  kv.free(1);
  kv.free(2);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  EXPECT_EQ(kv.prefix_cache()->num_cached_blocks(), 4);  // freed, still cached
  // Three fresh blocks: the two never-used ones, then a's last block (a was freed first, and a
  // sequence's tail goes before its head).
  Seq c{3, iota_tokens(12, 201)};
  admit(kv, c);
  EXPECT_EQ(kv.prefix_cache()->num_cached_blocks(), 3 + 3);  // c's 3 registered, a's tail gone
  // Free list now: a's head, b's tail, b's head. a2 takes a's head back and one fresh block,
  // which evicts b's tail; b's head is still there.
  Seq a2{4, iota_tokens(5, 1)};
  EXPECT_EQ(admit(kv, a2).size(), 1u);
  kv.free(3);
  Seq b2{5, iota_tokens(9, 101)};
  EXPECT_EQ(admit(kv, b2).size(), 1u);
}

TEST(PrefixCache, ABlockWhoseParentWasReusedNoLongerMatches) {
  // Hashes given by hand, equal on purpose: only the parent's identity keeps the old child out.
  PrefixCache c(4, kBs, 0);
  const std::vector<int32_t> ab = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_EQ(c.insert(0, -1, 0, ab, 7, ""), 0);
  ASSERT_EQ(c.insert(1, 0, 1, ab, 9, ""), 1);
  const std::vector<uint64_t> hashes = {7, 9};
  EXPECT_EQ(c.match(ab, hashes, "", 2, false).size(), 2u);
  c.forget(0);  // block 0 is reused for other tokens...
  const std::vector<int32_t> other_ab = {50, 60, 70, 80, 5, 6, 7, 8};
  ASSERT_EQ(c.insert(0, -1, 0, other_ab, 7, ""), 0);  // ...that collide with the old ones
  EXPECT_EQ(c.match(other_ab, hashes, "", 2, false).size(), 1u);  // block 1 follows the old block 0
  EXPECT_TRUE(c.match(ab, hashes, "", 2, false).empty());
}

TEST(PrefixCache, SnapshotsBindToTheirBlockAndLeaveWithIt) {
  KvCacheManager kv(8, kBs, true, /*num_snapshots=*/2);
  PrefixCache& c = *kv.prefix_cache();
  Seq a{1, iota_tokens(12)};
  admit(kv, a);
  // A hybrid model resumes only where a snapshot is: none yet.
  Seq probe{2, iota_tokens(13)};
  int32_t snap = -7;
  c.extend_hashes(probe.tokens, "", probe.hashes);
  EXPECT_TRUE(c.match(probe.tokens, probe.hashes, "", 3, true, &snap).empty());
  EXPECT_EQ(snap, -1);
  const int32_t s0 = c.reserve_snapshot(), s1 = c.reserve_snapshot();
  ASSERT_GE(s0, 0);
  ASSERT_GE(s1, 0);
  EXPECT_EQ(c.reserve_snapshot(), -1);  // both reserved
  c.bind_snapshot(s0, kv.cached_block(1, 1));  // the state after 8 tokens
  c.release_snapshot(s1);
  std::vector<int32_t> hit = c.match(probe.tokens, probe.hashes, "", 3, true, &snap);
  EXPECT_EQ(hit.size(), 2u);  // 3 blocks cached, the snapshot at the end of the second
  EXPECT_EQ(snap, s0);
  // A second snapshot for the same block is released, not bound twice.
  const int32_t s2 = c.reserve_snapshot();
  c.bind_snapshot(s2, kv.cached_block(1, 1));
  EXPECT_EQ(c.num_bound_snapshots(), 1);
  // The block is reused: the snapshot goes with it.
  kv.free(1);
  Seq other{3, iota_tokens(32, 1000)};
  admit(kv, other);
  EXPECT_EQ(c.num_bound_snapshots(), 0);
  EXPECT_TRUE(c.match(probe.tokens, probe.hashes, "", 3, true, &snap).empty());
}

TEST(PrefixCache, SnapshotsAreEvictedLeastRecentlyUsedFirst) {
  KvCacheManager kv(16, kBs, true, /*num_snapshots=*/2);
  PrefixCache& c = *kv.prefix_cache();
  Seq a{1, iota_tokens(8, 1)}, b{2, iota_tokens(8, 101)}, d{3, iota_tokens(8, 201)};
  for (Seq* s : {&a, &b, &d}) admit(kv, *s);
  const int32_t sa = c.reserve_snapshot();
  c.bind_snapshot(sa, kv.cached_block(1, 1));
  const int32_t sb = c.reserve_snapshot();
  c.bind_snapshot(sb, kv.cached_block(2, 1));
  c.touch_snapshot(sa);  // a used since: b's is the coldest
  const int32_t sd = c.reserve_snapshot();
  EXPECT_EQ(sd, sb);
  c.bind_snapshot(sd, kv.cached_block(3, 1));
  EXPECT_EQ(c.snapshot_of(kv.cached_block(2, 1)), -1);
  EXPECT_EQ(c.snapshot_of(kv.cached_block(1, 1)), sa);
}

TEST(KvCacheManager, BlocksNeededCountCachedFreeBlocksAHitTakes) {
  KvCacheManager kv(4, kBs, true, 0);
  Seq a{1, iota_tokens(8)};
  admit(kv, a);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  Seq b{2, iota_tokens(9)};
  kv.prefix_cache()->extend_hashes(b.tokens, "", b.hashes);
  const std::vector<int32_t> hit = kv.prefix_cache()->match(b.tokens, b.hashes, "", 2, false);
  ASSERT_EQ(hit.size(), 2u);
  // Two free cached blocks taken back + one new block for the ninth token.
  EXPECT_EQ(kv.blocks_needed_after(hit, 1), 3);
  kv.adopt_prefix(2, hit);
  EXPECT_EQ(kv.num_free_blocks(), 2);
  EXPECT_EQ(kv.num_tokens(2), 8);
  EXPECT_TRUE(kv.append_slots(2, 1));
  EXPECT_EQ(kv.num_free_blocks(), 1);
}

TEST(KvCacheManager, PrefixCachingOffSharesNothing) {
  KvCacheManager kv(8, kBs);
  EXPECT_FALSE(kv.prefix_caching());
  EXPECT_EQ(kv.prefix_cache(), nullptr);
  EXPECT_TRUE(kv.append_slots(1, 8));
  std::vector<uint64_t> none;
  kv.cache_full_blocks(1, iota_tokens(8), none, "", 8);  // a no-op, not an error
  EXPECT_EQ(kv.cached_block(1, 0), -1);
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// KV cache events (kv/kv_events.h): a registration tells its hash, its chain parent's hash and its
// tokens; a forgotten block its hash; a hash held by two blocks (the same chain registered again
// under another parent block) is told once, and removed when the last of them goes.
TEST(PrefixCacheEvents, StoredAndRemovedOncePerHash) {
  PrefixCache c(8, kBs, 0);
  KvEventLog log;
  c.set_event_log(&log);
  const std::vector<int32_t> t = iota_tokens(8);
  std::vector<uint64_t> h;
  c.extend_hashes(t, "", h);
  ASSERT_EQ(c.insert(0, -1, 0, t, h[0], ""), 0);
  ASSERT_EQ(c.insert(1, 0, 1, t, h[1], "", h[0]), 1);
  std::vector<KvEvent> ev = log.take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, KvEvent::Kind::Stored);
  EXPECT_EQ(ev[0].hash, h[0]);
  EXPECT_FALSE(ev[0].parent_hash.has_value());
  EXPECT_EQ(ev[0].token_ids, std::vector<int32_t>({1, 2, 3, 4}));
  EXPECT_EQ(ev[1].hash, h[1]);
  EXPECT_EQ(ev[1].parent_hash, h[0]);
  EXPECT_EQ(ev[1].token_ids, std::vector<int32_t>({5, 6, 7, 8}));
  // An equal block is not registered again: nothing to tell.
  EXPECT_EQ(c.insert(2, -1, 0, t, h[0], ""), 0);
  EXPECT_TRUE(log.empty());
  // The first block goes: its child can never be hit again, and the chain computed anew registers
  // a second block under h[1] — one hash, told once.
  c.forget(0);
  ASSERT_EQ(c.insert(3, -1, 0, t, h[0], ""), 3);
  ASSERT_EQ(c.insert(4, 3, 1, t, h[1], "", h[0]), 4);
  ev = log.take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, KvEvent::Kind::Removed);
  EXPECT_EQ(ev[0].hash, h[0]);
  EXPECT_EQ(ev[1].kind, KvEvent::Kind::Stored);
  EXPECT_EQ(ev[1].hash, h[0]);
  EXPECT_EQ(c.num_cached_blocks(), 3);
  EXPECT_EQ(c.num_cached_hashes(), 2);
  c.forget(1);
  EXPECT_TRUE(log.empty()) << "h[1] is still held by block 4";
  c.forget(4);
  ev = log.take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, KvEvent::Kind::Removed);
  EXPECT_EQ(ev[0].hash, h[1]);
  EXPECT_EQ(c.num_cached_hashes(), 1);
}

}  // namespace
}  // namespace pagoda
