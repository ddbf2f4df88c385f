#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda {
namespace {

// One sequence's share of a draft pass: its tokens [start, end) (from `tokens`, or the single
// token `fed` when >= 0) and whether its last one makes a logits row.
struct DraftRow {
  Sequence* seq;
  int32_t start, end;
  int32_t fed = -1;
  bool logits = false;
  int32_t hidden_base = -1;  // MTP: the hidden-input row of position `start` (the rest follow)
};

StepBatch build_draft_batch(const Scheduler& scheduler, const std::vector<DraftRow>& rows, int32_t block_size,
                            int32_t shift) {
  StepBatch b;
  b.block_size = block_size;
  for (const DraftRow& r : rows)
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq,
                                    static_cast<int32_t>(scheduler.kv().block_table(r.seq->id()).size()));
  b.cu_seqlens_q.assign(1, 0);
  b.block_tables.assign(rows.size() * static_cast<size_t>(b.max_blocks_per_seq), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const DraftRow& r = rows[i];
    const std::vector<int32_t>& table = scheduler.kv().block_table(r.seq->id());
    const std::span<const int32_t> tokens = r.seq->tokens();
    for (int32_t p = r.start; p < r.end; ++p) {
      b.token_ids.push_back(r.fed >= 0 ? r.fed : tokens[static_cast<size_t>(p + shift)]);
      if (r.hidden_base >= 0) b.hidden_rows.push_back(r.hidden_base + (p - r.start));
      b.positions.push_back(p);
      b.slot_mapping.push_back(table[static_cast<size_t>(p / block_size)] * block_size + p % block_size);
    }
    b.cu_seqlens_q.push_back(b.num_tokens());
    b.seq_lens.push_back(r.end);
    std::copy(table.begin(), table.end(),
              b.block_tables.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(b.max_blocks_per_seq)));
    b.state_slots.push_back(-1);
    b.has_initial_state.push_back(r.start > 0 ? 1 : 0);
    if (r.logits) b.logits_rows.push_back(b.num_tokens() - 1);
  }
  return b;
}

}  // namespace

DraftModelProposer::DraftModelProposer(const std::string& dir, const ModelConfig& target, Backend& backend)
    : backend_(backend) {
  const ModelConfig cfg = load_model_config(dir);
  check(cfg.vocab_size == target.vocab_size,
        "--speculative-config: the draft model in " + dir + " has a vocabulary of " + std::to_string(cfg.vocab_size) +
            " tokens, the target " + std::to_string(target.vocab_size) + "; a draft model must share the target's tokenizer");
  check(cfg.num_layers_of(LayerKind::LinearAttention) == 0,
        "--speculative-config: the draft model in " + dir +
            " has Gated DeltaNet layers; draft models with linear attention are not supported yet (use a dense one)");
  model_ = load_model(dir, backend);
}

DraftModelProposer::DraftModelProposer(std::unique_ptr<Model> mtp_head, Model& target, Backend& backend)
    : model_(std::move(mtp_head)), target_(&target), shift_(1), backend_(backend) {}

DraftModelProposer::DraftModelProposer(Eagle3Head head, Model& target, Backend& backend)
    : model_(std::move(head.model)), target_(&target), shift_(1), aux_input_(true),
      draft_to_target_(std::move(head.draft_to_target)), backend_(backend) {}

DraftModelProposer::~DraftModelProposer() = default;

int64_t DraftModelProposer::kv_bytes_per_token(DType kv_dtype) const {
  const ModelConfig& mc = model_->config();
  if (shift_ == 0) return mc.kv_bytes_per_token(kv_dtype);
  return 2 * mc.num_kv_heads * mc.head_dim * static_cast<int64_t>(dtype_size(kv_dtype));  // one layer
}

size_t DraftModelProposer::reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks_per_seq) {
  // A catch-up pass feeds what the target verified plus one sampled token per sequence.
  max_tokens_ = max_tokens + max_seqs;
  max_seqs_ = max_seqs;
  runner_ = std::make_unique<ModelRunner>(backend_, *model_, max_tokens_, max_seqs, max_blocks_per_seq);
  return runner_->workspace_bytes();
}

void DraftModelProposer::allocate(int32_t num_blocks, int32_t block_size, DType kv_dtype) {
  const ModelConfig& mc = model_->config();
  KvCacheShape shape;
  shape.num_layers = shift_ ? 1 : static_cast<int32_t>(mc.num_layers_of(LayerKind::FullAttention));
  shape.num_blocks = num_blocks;
  shape.block_size = block_size;
  shape.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  shape.head_dim = static_cast<int32_t>(mc.head_dim);
  shape.dtype = kv_dtype;
  kv_ = std::make_unique<PagedKvCache>(backend_, shape);
}

void DraftModelProposer::propose(Scheduler& scheduler, const SchedulerOutput& step, int32_t k) {
  const int32_t bs = scheduler.config().block_size;
  const int32_t max_len = scheduler.config().max_model_len;
  std::vector<DraftRow> rows;
  std::vector<int32_t> wanted;  // drafts per row
  for (size_t i = 0; i < step.scheduled.size(); ++i) {
    const ScheduledSequence& s = step.scheduled[i];
    Sequence* seq = s.seq;
    if (seq->status != SequenceStatus::Running || seq->embed) continue;
    seq->draft_tokens.clear();
    // What the target verified in the step; a sampling sequence also has the token sampled after
    // it. An MTP head stops one short: it needs the token after each position.
    const int32_t end = s.samples ? seq->num_tokens() - shift_ : seq->num_computed_tokens;
    if (end <= s.start) continue;
    int32_t d = s.samples ? draft_budget(*seq, k, max_len) : 0;
    // Slots for the catch-up and the drafts fed back (the last draft is never fed).
    if (!scheduler.reserve_lookahead(*seq, end + std::max(d - 1, 0))) {
      d = 0;
      if (!scheduler.reserve_lookahead(*seq, end)) continue;
    }
    // MTP: the target's hidden state of each position, by its row in the step's flat batch.
    const int32_t base = shift_ ? step.batch.cu_seqlens_q[i] : -1;
    rows.push_back({seq, s.start, end, -1, d > 0, base});
    wanted.push_back(d);
  }
  if (rows.empty()) return;
  // The catch-up pass runs even when no sequence drafts this step (k = 0: adaptive speculation,
  // disable_by_batch_size, a sequence at its limit): the draft model's cache must hold every
  // verified token, or the drafts of later steps attend to holes.
  int32_t passes = 1;
  for (int32_t d : wanted) passes = std::max(passes, d);
  // Pass 1: catch up; then one token per drafting sequence per pass.
  std::vector<DraftRow> pass = rows;
  std::vector<size_t> owner;  // rows index of each logits row of the pass
  for (size_t i = 0; i < rows.size(); ++i)
    if (wanted[i] > 0) owner.push_back(i);
  int32_t prev_rows = 0;  // logits rows of the pass before
  for (int32_t j = 1; j <= passes && !pass.empty(); ++j) {
    const StepBatch batch = build_draft_batch(scheduler, pass, bs, shift_);
    // MTP, EAGLE-3: the first pass reads the target's hidden states (EAGLE-3: at its aux
    // layers), later ones the head's own output rows of the pass before.
    if (shift_ && j > 1) model_->set_hidden_input(model_->draft_hidden_rows(prev_rows));
    else if (aux_input_) model_->set_aux_hidden_input(target_->aux_hidden(step.batch.num_tokens()));
    else if (shift_) model_->set_hidden_input(target_->final_hidden(step.batch.num_tokens()));
    check_invariant(batch.num_tokens() <= max_tokens_ && batch.num_seqs() <= max_seqs_,
                    "a draft pass exceeds the draft runner's reserved sizes");
    const StepLogits& out = runner_->execute_greedy(batch, *kv_, nullptr, {});
    std::vector<DraftRow> next;
    std::vector<size_t> next_owner;
    for (size_t r = 0; r < owner.size(); ++r) {
      const size_t i = owner[r];
      int32_t token = out.argmax[r];
      if (!draft_to_target_.empty()) token = draft_to_target_[static_cast<size_t>(token)];
      rows[i].seq->draft_tokens.push_back(token);
      if (j >= wanted[i]) continue;
      // Draft j goes in at the position after the previous one.
      const int32_t pos = rows[i].end + j - 1;
      next.push_back({rows[i].seq, pos, pos + 1, token, true, shift_ ? static_cast<int32_t>(r) : -1});
      next_owner.push_back(i);
    }
    prev_rows = static_cast<int32_t>(owner.size());
    pass = std::move(next);
    owner = std::move(next_owner);
  }
  for (const DraftRow& r : rows) scheduler.drop_lookahead(*r.seq);
}

}  // namespace pagoda
