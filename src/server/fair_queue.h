// Which waiting choices go into the engine next, so that no request and no client can starve the
// others. The engine's own scheduler is first-come first-served; fed everything at once, one
// request with n = 256 (or one embeddings request with 1,024 inputs) would be served to its end
// before a 4-token request that came a moment later. So the server holds generations back here and
// hands the engine only what it can start soon:
//   - at most `max_seqs` choices in the engine at once (its --max-num-seqs), of which the last
//     `reserved_seqs` only go to a newcomer: a generation with nothing in the engine yet, of a
//     client with nothing there either (when the request names one); it starts at once, however
//     much older ones still hold;
//   - at most `max_unstarted_tokens` prompt tokens admitted and not yet prefilled (a newcomer's
//     first choice excepted): whatever comes next waits behind a step or two of prefill, never
//     behind thousands of tokens of someone else's embeddings;
//   - the next choice from the client with the fewest choices in the engine, and within it from
//     the generation with the fewest (oldest first on a tie): round robin between clients, then
//     between one client's requests.
// Plain bookkeeping with no locks: the engine thread alone uses it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pagoda::server {

struct FairQueueLimits {
  int32_t max_seqs = 64;
  int32_t reserved_seqs = 4;
  int64_t max_unstarted_tokens = 4096;
};

class FairQueue {
 public:
  explicit FairQueue(FairQueueLimits limits) : limits_(limits) {}

  // A generation whose choices wait; `prompt_tokens[i]` is choice i's prompt length. `client` groups
  // generations ("" = the anonymous client). `priority` (--scheduling-policy priority; 0 under fcfs)
  // comes before fairness: a lower value goes first.
  void push(uint64_t generation, const std::string& client, std::vector<int64_t> prompt_tokens,
            int32_t priority = 0);

  struct Admit {
    uint64_t generation;
    size_t choice;
    int64_t prompt_tokens;
  };
  // The choices to give the engine now, in order; each is counted as in the engine until
  // finished() (and as unstarted until started()). `engine_id` of each is set by admitted().
  std::vector<Admit> take();
  void admitted(const Admit& a, int64_t engine_id);
  // A choice taken that the engine refused: as if it had never been taken, nor will be.
  void abandon(const Admit& a);

  // The engine's first output for the choice (its prompt is prefilled), and its last.
  void started(int64_t engine_id);
  void finished(int64_t engine_id);
  // The generation is cancelled: its choices not yet taken are forgotten. Returns how many.
  size_t drop(uint64_t generation);

  bool has_waiting() const { return waiting_choices_ > 0; }
  int64_t waiting_choices() const { return waiting_choices_; }
  // The engine has nothing left: whatever is still counted as in it is not (a safety net; the
  // bookkeeping should already agree). Returns whether anything was corrected.
  bool engine_idle();
  int32_t in_engine() const { return in_engine_; }
  int64_t unstarted_tokens() const { return unstarted_tokens_; }

 private:
  struct Generation {
    std::string client;
    std::vector<int64_t> prompt_tokens;
    size_t next = 0;      // choices before it were taken
    int32_t in_engine = 0;
    uint64_t order = 0;   // arrival order, for ties
    int32_t priority = 0;
  };
  struct InEngine {
    uint64_t generation;
    int64_t prompt_tokens;
    bool started = false;
  };
  // The generation whose next choice is due and may go now, or nullptr.
  Generation* pick(uint64_t& id);
  void leave(uint64_t generation, int64_t unstarted_tokens);
  void forget_if_done(std::map<uint64_t, Generation>::iterator it);

  FairQueueLimits limits_;
  std::map<uint64_t, Generation> gens_;  // with choices waiting or in the engine
  std::unordered_map<std::string, int32_t> client_in_engine_;
  std::unordered_map<int64_t, InEngine> engine_;
  int32_t in_engine_ = 0;
  int64_t unstarted_tokens_ = 0;
  int64_t waiting_choices_ = 0;
  uint64_t arrivals_ = 0;
};

}  // namespace pagoda::server
