#include "engine/grammar_masks.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "engine/sequence.h"

namespace pagoda {

void fill_grammar_mask(Sequence& s, int32_t max_model_len) {
  if (!s.matcher) return;
  try {
    int64_t left = int64_t{max_model_len} - s.num_tokens();
    if (s.params().max_tokens) left = std::min<int64_t>(left, *s.params().max_tokens - s.num_output_tokens());
    s.matcher->fill_mask(s.grammar_mask, left);
  } catch (const Error& e) {
    // Ends that sequence (EOS only) rather than failing the engine step.
    LOG_WARN("structured output of request " << s.id() << " stopped: " << e.what());
    s.grammar_mask.assign((static_cast<size_t>(s.matcher->runtime().vocab_size()) + 63) / 64, 0);
    for (int32_t id : s.matcher->runtime().eos_ids())
      if (id >= 0 && static_cast<size_t>(id >> 6) < s.grammar_mask.size())
        structured::mask_allow(s.grammar_mask, static_cast<size_t>(id));
  }
}

GrammarMaskWorkers::GrammarMaskWorkers(int num_workers) {
  if (num_workers < 0)
    num_workers = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 2u, 9u)) - 1;
  for (int i = 0; i < num_workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

GrammarMaskWorkers::~GrammarMaskWorkers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void GrammarMaskWorkers::start(const std::vector<Sequence*>& rows, int32_t max_model_len) {
  {
    std::lock_guard lock(mu_);
    rows_ = &rows;
    max_model_len_ = max_model_len;
    next_.store(0, std::memory_order_relaxed);
    ++generation_;
  }
  wake_.notify_all();
}

void GrammarMaskWorkers::run_rows() {
  const std::vector<Sequence*>& rows = *rows_;
  for (size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < rows.size();) {
    try {
      fill_grammar_mask(*rows[i], max_model_len_);
    } catch (const std::exception& e) {
      // e.g. bad_alloc of a mask its grammar made large: that request fails alone (the engine
      // reads step_error after wait(); each row is one thread's).
      rows[i]->step_error = std::string("computing its structured-output mask failed (") + e.what() + ")";
    } catch (...) {  // the engine thread rethrows it from wait()
      std::lock_guard lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void GrammarMaskWorkers::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (!rows_) continue;
    ++active_;
    lock.unlock();
    run_rows();
    lock.lock();
    if (--active_ == 0) done_.notify_all();
  }
}

void GrammarMaskWorkers::wait() {
  if (!rows_) return;
  run_rows();
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return active_ == 0; });
  rows_ = nullptr;
  std::lock_guard error_lock(error_mu_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace pagoda
