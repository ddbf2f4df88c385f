#include "engine/grammar_masks.h"

#include <algorithm>

#include "core/error.h"
#include "core/fault_injection.h"
#include "core/log.h"
#include "engine/sequence.h"

namespace pagoda {

namespace {

// Ends the sequence's structured output: only EOS may follow.
void allow_only_eos(Sequence& s) {
  s.grammar_mask.assign((static_cast<size_t>(s.matcher->runtime().vocab_size()) + 63) / 64, 0);
  for (int32_t id : s.matcher->runtime().eos_ids())
    if (id >= 0 && static_cast<size_t>(id >> 6) < s.grammar_mask.size()) structured::mask_allow(s.grammar_mask, static_cast<size_t>(id));
}

}  // namespace

void run_grammar_job(const GrammarMaskWorkers::Job& job) {
  Sequence& s = *job.seq;
  // Its size is the request's doing (a large grammar): a failure fails this request alone.
  if (job.make_matcher) {
    grammar_delay_point();
    s.matcher.emplace(s.params().grammar);
  }
  if (!s.matcher) return;
  try {
    // A token the grammar does not take (only with ignore_eos, when the mask allowed nothing but
    // EOS) leaves the state as it was, as before.
    if (job.accept) s.matcher->accept(job.token);
    s.matcher->fill_mask(s.grammar_mask, job.tokens_left);
  } catch (const Error& e) {
    // Ends that sequence (EOS only) rather than failing anything else.
    LOG_WARN("structured output of request " << s.id() << " stopped: " << e.what());
    allow_only_eos(s);
  }
}

GrammarMaskWorkers::GrammarMaskWorkers(int num_workers) {
  if (num_workers < 0)
    num_workers = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 2u, 9u)) - 1;
  num_workers = std::max(num_workers, 1);
  for (int i = 0; i < num_workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

GrammarMaskWorkers::~GrammarMaskWorkers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (const Job& j : queue_) pending_.erase(j.seq);
    queue_.clear();
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void GrammarMaskWorkers::submit(const Job& job) {
  {
    std::lock_guard lock(mu_);
    pending_[job.seq] = Clock::now();
    queue_.push_back(job);
  }
  wake_.notify_one();
}

bool GrammarMaskWorkers::pending(const Sequence* seq) const {
  std::lock_guard lock(mu_);
  return pending_.count(seq) != 0;
}

bool GrammarMaskWorkers::any_pending() const {
  std::lock_guard lock(mu_);
  return !pending_.empty();
}

void GrammarMaskWorkers::wait_recent(std::chrono::nanoseconds grace) {
  std::unique_lock lock(mu_);
  // The queued continuations (a grammar's next mask after a token: usually microseconds, often a
  // copy from its cache) run here, on the waiting thread, instead of waiting for a worker to wake:
  // the handoff cost more than the mask (CPU tg128 under a schema 0.82x -> 0.55x of unconstrained
  // on the default model). A grammar's first mask, which can take seconds, stays with the workers.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->make_matcher) {
      ++it;
      continue;
    }
    const Job job = *it;
    queue_.erase(it);
    lock.unlock();
    run(job);
    lock.lock();
    it = queue_.begin();  // the workers may have taken jobs meanwhile
  }
  for (;;) {
    // The latest deadline among the jobs still in their grace.
    const auto now = Clock::now();
    Clock::time_point until = now;
    for (const auto& [seq, since] : pending_) until = std::max(until, since + grace);
    if (until <= now) return;
    done_.wait_until(lock, until);
  }
}

void GrammarMaskWorkers::wait_any(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (pending_.empty()) return;
  done_.wait_for(lock, timeout);
}

std::vector<std::pair<int64_t, std::string>> GrammarMaskWorkers::take_failures() {
  std::lock_guard lock(mu_);
  return std::exchange(failures_, {});
}

void GrammarMaskWorkers::run(const Job& job) {
  std::string failure;
  try {
    run_grammar_job(job);
  } catch (const std::exception& e) {
    job.seq->matcher.reset();
    failure = std::string(job.make_matcher ? "making" : "advancing") + " its structured-output state failed (" +
              e.what() + ")";
  } catch (...) {
    job.seq->matcher.reset();
    failure = "its structured-output state failed (an exception that is not a std::exception)";
  }
  {
    std::lock_guard lock(mu_);
    if (!failure.empty()) failures_.emplace_back(job.seq->id(), std::move(failure));
    pending_.erase(job.seq);
  }
  done_.notify_all();
}

void GrammarMaskWorkers::worker_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Job job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    run(job);
    lock.lock();
  }
}

}  // namespace pagoda
