#include "server/waiting_limits.h"

namespace pagoda::server {

WaitingLimits::WaitingLimits(int32_t max_waiting_requests, int64_t max_waiting_tokens)
    : max_requests_(max_waiting_requests), max_tokens_(max_waiting_tokens) {}

bool WaitingLimits::try_add(int64_t choices, int64_t work, const std::string& client, std::string& why) {
  std::lock_guard lock(mu_);
  if (max_requests_ > 0 && unstarted_.load() + choices > max_requests_) {
    why = "the server is overloaded: " + std::to_string(unstarted_.load()) +
          " requests are waiting (--max-waiting-requests " + std::to_string(max_requests_) + "); retry later";
    return false;
  }
  // A request always fits a queue that is empty (of its client's work, or of all work): past the
  // per-request cost limits, no size makes it wait forever.
  if (max_tokens_ > 0 && waiting_work_ > 0 && waiting_work_ + work > max_tokens_) {
    why = "the server is full: " + std::to_string(waiting_work_) + " tokens of work wait to start "
          "(--max-waiting-tokens " + std::to_string(max_tokens_) + "); retry later";
    return false;
  }
  if (!client.empty()) {
    const auto it = client_work_.find(client);
    const int64_t mine = it == client_work_.end() ? 0 : it->second;
    if (max_tokens_ > 0 && mine > 0 && mine + work > max_tokens_ / 2) {
      why = "client '" + client.substr(0, 64) + "' already has " + std::to_string(mine) +
            " tokens of work waiting, half of what the server queues (--max-waiting-tokens " +
            std::to_string(max_tokens_) + "); retry when some of it has started";
      return false;
    }
    client_work_[client] = mine + work;
  }
  waiting_work_ += work;
  unstarted_ += choices;
  return true;
}

void WaitingLimits::release_work(const std::string& client, int64_t work) {
  std::lock_guard lock(mu_);
  waiting_work_ -= work;
  if (client.empty()) return;
  if (auto it = client_work_.find(client); it != client_work_.end() && (it->second -= work) <= 0) client_work_.erase(it);
}

int64_t WaitingLimits::waiting_work() const {
  std::lock_guard lock(mu_);
  return waiting_work_;
}

}  // namespace pagoda::server
