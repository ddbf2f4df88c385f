#include "server/fair_queue.h"

#include <tuple>

namespace pagoda::server {

void FairQueue::push(uint64_t generation, const std::string& client, std::vector<int64_t> prompt_tokens,
                     int32_t priority) {
  if (prompt_tokens.empty()) return;
  waiting_choices_ += static_cast<int64_t>(prompt_tokens.size());
  Generation& g = gens_[generation];
  g.client = client;
  g.prompt_tokens = std::move(prompt_tokens);
  g.order = arrivals_++;
  g.priority = priority;
}

FairQueue::Generation* FairQueue::pick(uint64_t& id) {
  Generation* best = nullptr;
  std::tuple<int32_t, int32_t, int32_t, uint64_t> best_key{};
  for (auto& [gid, g] : gens_) {
    if (g.next >= g.prompt_tokens.size()) continue;
    // A named client's second request is no newcomer while its first runs: one client cannot take
    // every reserved sequence. (Anonymous requests cannot be told apart by client.)
    const auto c = client_in_engine_.find(g.client);
    const int32_t client_live = c == client_in_engine_.end() ? 0 : c->second;
    const bool newcomer = g.in_engine == 0 && (g.client.empty() || client_live == 0);
    const bool slot = in_engine_ < limits_.max_seqs - limits_.reserved_seqs || (newcomer && in_engine_ < limits_.max_seqs);
    const int64_t tokens = g.prompt_tokens[g.next];
    const bool room = newcomer || unstarted_tokens_ == 0 || unstarted_tokens_ + tokens <= limits_.max_unstarted_tokens;
    if (!slot || !room) continue;
    const std::tuple<int32_t, int32_t, int32_t, uint64_t> key{g.priority, client_live, g.in_engine, g.order};
    if (!best || key < best_key) {
      best = &g;
      best_key = key;
      id = gid;
    }
  }
  return best;
}

std::vector<FairQueue::Admit> FairQueue::take() {
  std::vector<Admit> out;
  uint64_t id = 0;
  while (Generation* g = pick(id)) {
    const size_t choice = g->next++;
    const int64_t tokens = g->prompt_tokens[choice];
    --waiting_choices_;
    ++g->in_engine;
    ++client_in_engine_[g->client];
    ++in_engine_;
    unstarted_tokens_ += tokens;
    out.push_back(Admit{id, choice, tokens});
  }
  return out;
}

void FairQueue::admitted(const Admit& a, int64_t engine_id) {
  engine_[engine_id] = InEngine{a.generation, a.prompt_tokens, false};
}

void FairQueue::started(int64_t engine_id) {
  const auto it = engine_.find(engine_id);
  if (it == engine_.end() || it->second.started) return;
  it->second.started = true;
  unstarted_tokens_ -= it->second.prompt_tokens;
}

void FairQueue::finished(int64_t engine_id) {
  const auto it = engine_.find(engine_id);
  if (it == engine_.end()) return;
  const InEngine e = it->second;
  engine_.erase(it);
  leave(e.generation, e.started ? 0 : e.prompt_tokens);
}

void FairQueue::abandon(const Admit& a) { leave(a.generation, a.prompt_tokens); }

bool FairQueue::engine_idle() {
  if (in_engine_ == 0 && engine_.empty() && unstarted_tokens_ == 0) return false;
  engine_.clear();
  in_engine_ = 0;
  unstarted_tokens_ = 0;
  client_in_engine_.clear();
  for (auto it = gens_.begin(); it != gens_.end();) {
    it->second.in_engine = 0;
    if (it->second.next >= it->second.prompt_tokens.size()) it = gens_.erase(it);
    else ++it;
  }
  return true;
}

void FairQueue::leave(uint64_t generation, int64_t unstarted_tokens) {
  unstarted_tokens_ -= unstarted_tokens;
  --in_engine_;
  const auto g = gens_.find(generation);
  if (g == gens_.end()) return;
  --g->second.in_engine;
  if (const auto c = client_in_engine_.find(g->second.client); c != client_in_engine_.end() && --c->second == 0)
    client_in_engine_.erase(c);
  forget_if_done(g);
}

size_t FairQueue::drop(uint64_t generation) {
  const auto g = gens_.find(generation);
  if (g == gens_.end()) return 0;
  const size_t dropped = g->second.prompt_tokens.size() - g->second.next;
  waiting_choices_ -= static_cast<int64_t>(dropped);
  g->second.next = g->second.prompt_tokens.size();
  forget_if_done(g);
  return dropped;
}

void FairQueue::forget_if_done(std::map<uint64_t, Generation>::iterator it) {
  if (it->second.next >= it->second.prompt_tokens.size() && it->second.in_engine == 0) gens_.erase(it);
}

}  // namespace pagoda::server
