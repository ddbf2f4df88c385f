// The server's limits on work waiting to start (--max-waiting-requests, --max-waiting-tokens): the
// choices submitted that have no output yet, and the tokens of work (a choice's prompt + max_tokens;
// an embedding input's prompt) not yet handed to an engine, in all and per named client. One set is
// shared by every data-parallel replica, so that the limits stay the server's whatever the number of
// engines. Thread-safe: HTTP threads add, engine threads take away.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pagoda::server {

class WaitingLimits {
 public:
  // 0 = no limit. A named client may hold half of max_waiting_tokens.
  WaitingLimits(int32_t max_waiting_requests, int64_t max_waiting_tokens);

  // Counts `choices` carrying `work` tokens of `client` ("" = the anonymous client) as waiting, or
  // returns false with `why` (for a 503 with Retry-After) when that would pass a limit.
  bool try_add(int64_t choices, int64_t work, const std::string& client, std::string& why);
  // `n` choices got their first output, or left without one (dropped, failed).
  void started(int64_t n = 1) { unstarted_ -= n; }
  // `work` tokens of `client` went to an engine, or were dropped.
  void release_work(const std::string& client, int64_t work);

  int64_t unstarted() const { return unstarted_.load(); }
  int64_t waiting_work() const;

 private:
  const int32_t max_requests_;
  const int64_t max_tokens_;
  std::atomic<int64_t> unstarted_{0};
  mutable std::mutex mu_;
  int64_t waiting_work_ = 0;
  std::unordered_map<std::string, int64_t> client_work_;  // named clients only
};

}  // namespace pagoda::server
