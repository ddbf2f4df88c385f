// Qwen3.5's vision tower (transformers' Qwen3_5VisionModel; the Qwen3-VL tower without deepstack),
// from the backend's primitives (docs/vision.md):
//   x = patches · W_patchᵀ + b  (the Conv3d with stride = kernel is this product)
//     + the learned position table resampled to the image's grid (bilinear, align_corners)
//   per block: x += proj(attn(rope2d(qkv(LN1(x)))));  x += fc2(gelu_tanh(fc1(LN2(x))))
//   merger: LN(x) viewed as [patches / m², m²·C] (the processor's order keeps each m×m block together),
//           fc2(gelu(fc1(·))) → the decoder's hidden size.
// Attention is bidirectional within each frame; the 2-D RoPE rotates the first half of the pairs by
// the patch's row and the second half by its column.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/config_reader.h"
#include "io/text_file.h"
#include "model/vision_encoder.h"
#include "model/weight_store.h"

namespace pagoda {

namespace {

using json = nlohmann::json;

struct VisionConfig {
  int64_t depth = 0, hidden = 0, intermediate = 0, heads = 0, in_channels = 3, patch = 0, temporal_patch = 0,
          merge = 0, out_hidden = 0, num_positions = 0;
  double rope_theta = 10000.0;
  bool tanh_gelu = true;  // the blocks' MLP activation (gelu_pytorch_tanh); the merger's is exact GELU
};

int64_t vision_int(const json& vc, const std::string& key, int64_t lo, int64_t hi) {
  const json* v = ConfigReader::get(vc, key);
  check(v != nullptr, "config.json: vision_config." + key + " is missing");
  return ConfigReader::to_int(*v, "config.json: vision_config." + key, lo, hi);
}

VisionConfig read_vision_config(const json& vc) {
  VisionConfig c;
  c.depth = vision_int(vc, "depth", 1, 256);
  c.hidden = vision_int(vc, "hidden_size", 1, 1 << 16);
  c.intermediate = vision_int(vc, "intermediate_size", 1, 1 << 18);
  c.heads = vision_int(vc, "num_heads", 1, 1024);
  c.in_channels = ConfigReader::get(vc, "in_channels") ? vision_int(vc, "in_channels", 1, 4) : 3;
  c.patch = vision_int(vc, "patch_size", 1, 1024);
  c.temporal_patch = vision_int(vc, "temporal_patch_size", 1, 16);
  c.merge = vision_int(vc, "spatial_merge_size", 1, 16);
  c.out_hidden = vision_int(vc, "out_hidden_size", 1, 1 << 18);
  c.num_positions = vision_int(vc, "num_position_embeddings", 1, 1 << 24);
  check(c.hidden % c.heads == 0 && (c.hidden / c.heads) % 4 == 0,
        "config.json: vision_config.hidden_size / num_heads must be a multiple of 4 (the 2-D RoPE)");
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c.num_positions))));
  check(side * side == c.num_positions, "config.json: vision_config.num_position_embeddings must be a square");
  if (const json* a = ConfigReader::get(vc, "hidden_act")) {
    check(a->is_string() && (*a == "gelu_pytorch_tanh" || *a == "gelu"),
          "config.json: vision_config.hidden_act must be gelu_pytorch_tanh or gelu");
    c.tanh_gelu = *a == "gelu_pytorch_tanh";
  }
  check(!ConfigReader::get(vc, "deepstack_visual_indexes"),
        "config.json: vision_config.deepstack_visual_indexes (Qwen3-VL's deepstack) is not supported yet");
  if (const json* rp = ConfigReader::get(vc, "rope_parameters"))
    if (const json* t = ConfigReader::get(*rp, "rope_theta"))
      c.rope_theta = ConfigReader::to_positive(*t, "config.json: vision_config.rope_parameters.rope_theta");
  return c;
}

struct Block {
  Tensor norm1_w, norm1_b, norm2_w, norm2_b;
  Tensor qkv_w, qkv_b, proj_w, proj_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

class Qwen3_5Vision final : public VisionEncoder {
 public:
  Qwen3_5Vision(const VisionConfig& cfg, const Checkpoint& ckpt, Backend& be)
      : c_(cfg), be_(be), ws_(be, ckpt), wdt_(be.device() == Device::CUDA ? be.activation_dtype()
                                                                         : WeightStore::native_dtype(ckpt)) {
    const std::string p = "model.visual.";
    const int64_t C = c_.hidden, I = c_.intermediate, M = C * c_.merge * c_.merge;
    patch_w_ = ws_.load(p + "patch_embed.proj.weight", wdt_, {C, c_.in_channels, c_.temporal_patch, c_.patch, c_.patch})
                   .reshape({C, patch_dim()});
    patch_b_ = ws_.load(p + "patch_embed.proj.bias", DType::F32, {C});
    pos_table_ = ws_.host_floats(p + "pos_embed.weight");
    check(static_cast<int64_t>(pos_table_.size()) == c_.num_positions * C,
          "model.visual.pos_embed.weight must be [num_position_embeddings, hidden_size]");
    for (int64_t i = 0; i < c_.depth; ++i) {
      const std::string b = p + "blocks." + std::to_string(i) + ".";
      Block k;
      k.norm1_w = ws_.load(b + "norm1.weight", DType::F32, {C});
      k.norm1_b = ws_.load(b + "norm1.bias", DType::F32, {C});
      k.norm2_w = ws_.load(b + "norm2.weight", DType::F32, {C});
      k.norm2_b = ws_.load(b + "norm2.bias", DType::F32, {C});
      k.qkv_w = ws_.load(b + "attn.qkv.weight", wdt_, {3 * C, C});
      k.qkv_b = ws_.load(b + "attn.qkv.bias", DType::F32, {3 * C});
      k.proj_w = ws_.load(b + "attn.proj.weight", wdt_, {C, C});
      k.proj_b = ws_.load(b + "attn.proj.bias", DType::F32, {C});
      k.fc1_w = ws_.load(b + "mlp.linear_fc1.weight", wdt_, {I, C});
      k.fc1_b = ws_.load(b + "mlp.linear_fc1.bias", DType::F32, {I});
      k.fc2_w = ws_.load(b + "mlp.linear_fc2.weight", wdt_, {C, I});
      k.fc2_b = ws_.load(b + "mlp.linear_fc2.bias", DType::F32, {C});
      blocks_.push_back(k);
    }
    merger_norm_w_ = ws_.load(p + "merger.norm.weight", DType::F32, {C});
    merger_norm_b_ = ws_.load(p + "merger.norm.bias", DType::F32, {C});
    merger_fc1_w_ = ws_.load(p + "merger.linear_fc1.weight", wdt_, {M, M});
    merger_fc1_b_ = ws_.load(p + "merger.linear_fc1.bias", DType::F32, {M});
    merger_fc2_w_ = ws_.load(p + "merger.linear_fc2.weight", wdt_, {c_.out_hidden, M});
    merger_fc2_b_ = ws_.load(p + "merger.linear_fc2.bias", DType::F32, {c_.out_hidden});
    // The 2-D RoPE's pair table: pair j < n/2 turns with the row (axis 0), the rest with the
    // column (axis 1), both at inv_freq[j mod n/2] = θ^(-2(j mod n/2) / (D/2)) (transformers' axial rope).
    const int64_t D = C / c_.heads, n = D / 2, q = n / 2;
    std::vector<int32_t> axes(static_cast<size_t>(n));
    std::vector<float> inv(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      axes[static_cast<size_t>(j)] = j < q ? 0 : 1;
      const int64_t i = j % q;
      // fp32 throughout, as torch computes base ** (arange(0, D/2, 2) / (D/2)).
      const float e = static_cast<float>(2 * i) / static_cast<float>(D / 2);
      inv[static_cast<size_t>(j)] = 1.0f / std::pow(static_cast<float>(c_.rope_theta), e);
    }
    table_buf_ = be_.alloc(static_cast<size_t>(n) * (sizeof(int32_t) + sizeof(float)));
    axes_ = Tensor(table_buf_.data(), DType::I32, be_.device(), {n});
    inv_freq_ = Tensor(static_cast<char*>(table_buf_.data()) + n * sizeof(int32_t), DType::F32, be_.device(), {n});
    be_.copy_to_device(axes_.data, axes.data(), axes.size() * sizeof(int32_t));
    be_.copy_to_device(inv_freq_.data, inv.data(), inv.size() * sizeof(float));
  }

  int64_t out_hidden() const override { return c_.out_hidden; }
  int64_t patch_dim() const override { return c_.in_channels * c_.temporal_patch * c_.patch * c_.patch; }
  int64_t spatial_merge_size() const override { return c_.merge; }
  size_t weight_bytes() const override { return ws_.bytes() + ws_.mapped_bytes(); }

  std::vector<OpUse> required_ops() const override {
    const DType a = be_.activation_dtype();
    return {{Op::Linear, wdt_}, {Op::AddBias, a}, {Op::Add, a}, {Op::LayerNorm, a},
            {Op::Gelu, a},      {Op::RopeAxes, a}, {Op::SegmentAttention, a}};
  }

  void encode(int32_t grid_t, int32_t grid_h, int32_t grid_w, std::span<const float> pixels, Tensor& out) override {
    const int64_t m = c_.merge, C = c_.hidden, I = c_.intermediate, H = c_.heads, D = C / H;
    check(grid_t >= 1 && grid_h >= m && grid_w >= m && grid_h % m == 0 && grid_w % m == 0,
          "an image's patch grid must be a multiple of the merge size in both directions");
    const int64_t N = int64_t{grid_t} * grid_h * grid_w, merged = N / (m * m);
    check(static_cast<int64_t>(pixels.size()) == N * patch_dim(), "an image's pixel values do not fill its grid");
    check(out.size(0) == merged && out.size(1) == c_.out_hidden, "encode: out must be [merged tokens, out_hidden]");
    reserve(N, grid_t);
    const DType act = be_.activation_dtype();
    const Device dev = be_.device();
    auto scratch = [&](size_t slot, int64_t rows, int64_t cols) {
      return Tensor(scratch_[slot].data(), act, dev, {rows, cols});
    };
    Tensor px = scratch(0, N, patch_dim()), x = scratch(1, N, C), xn = scratch(2, N, C), qkv = scratch(3, N, 3 * C),
           attn = scratch(4, N, C), tmp = scratch(5, N, C), mlp = scratch(6, N, I);
    be_.upload_convert(Tensor(const_cast<float*>(pixels.data()), DType::F32, Device::CPU, {N, patch_dim()}), px);
    be_.linear(px, patch_w_, x);
    be_.add_bias(x, patch_b_);
    // Learned positions resampled to the grid, and the rows / columns the RoPE turns by, in the
    // processor's patch order (frames, then m×m blocks row-major, then rows and columns in a block).
    std::vector<float> pos(static_cast<size_t>(N * C), 0.0f);
    std::vector<int32_t> rc(static_cast<size_t>(2 * N));
    std::vector<int32_t> cu(static_cast<size_t>(grid_t) + 1);
    const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c_.num_positions))));
    auto taps = [&](int64_t index, int64_t size, int64_t t[2], float w[2]) {
      // transformers' _interpolation_axis_taps_weights, bilinear, align_corners=True, border padding.
      const float src = static_cast<float>(index) * static_cast<float>(side - 1) /
                        static_cast<float>(std::max<int64_t>(size - 1, 1));
      const float fl = std::floor(src);
      for (int k = 0; k < 2; ++k) {
        t[k] = std::clamp<int64_t>(static_cast<int64_t>(fl) + k, 0, side - 1);
        w[k] = std::max(0.0f, 1.0f - std::fabs(src - fl - static_cast<float>(k)));
      }
    };
    const int64_t per_frame = int64_t{grid_h} * grid_w, blocks_w = grid_w / m;
    for (int64_t i = 0; i < N; ++i) {
      const int64_t within = i % per_frame;
      const int64_t in_col = within % m, in_row = (within / m) % m, block_col = (within / (m * m)) % blocks_w,
                    block_row = within / (m * m * blocks_w);
      const int64_t row = block_row * m + in_row, col = block_col * m + in_col;
      rc[static_cast<size_t>(i)] = static_cast<int32_t>(row);
      rc[static_cast<size_t>(N + i)] = static_cast<int32_t>(col);
      int64_t ht[2], wt[2];
      float hw[2], ww[2];
      taps(row, grid_h, ht, hw);
      taps(col, grid_w, wt, ww);
      float* dst = pos.data() + i * C;
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          const float w = hw[a] * ww[b];
          const float* src = pos_table_.data() + (ht[a] * side + wt[b]) * C;
          for (int64_t k = 0; k < C; ++k) dst[k] += src[k] * w;
        }
    }
    for (int32_t f = 0; f <= grid_t; ++f) cu[static_cast<size_t>(f)] = static_cast<int32_t>(f * per_frame);
    be_.upload_convert(Tensor(pos.data(), DType::F32, Device::CPU, {N, C}), tmp);
    be_.add(x, tmp, x);
    Tensor positions(index_buf_.data(), DType::I32, dev, {2, N});
    Tensor cu_seqlens(static_cast<int32_t*>(index_buf_.data()) + 2 * N, DType::I32, dev, {int64_t{grid_t} + 1});
    be_.copy_to_device(positions.data, rc.data(), rc.size() * sizeof(int32_t));
    be_.copy_to_device(cu_seqlens.data, cu.data(), cu.size() * sizeof(int32_t));

    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (const Block& k : blocks_) {
      be_.layer_norm(x, k.norm1_w, k.norm1_b, xn, 1e-6f);
      be_.linear(xn, k.qkv_w, qkv);
      be_.add_bias(qkv, k.qkv_b);
      Tensor q = qkv.cols(0, C).reshape({N, H, D}), kk = qkv.cols(C, 2 * C).reshape({N, H, D}),
             v = qkv.cols(2 * C, 3 * C).reshape({N, H, D});
      be_.rope_axes(q, positions, axes_, inv_freq_);
      be_.rope_axes(kk, positions, axes_, inv_freq_);
      Tensor a3 = attn.reshape({N, H, D});
      be_.segment_attention(q, kk, v, cu_seqlens, scale, a3);
      be_.linear(attn, k.proj_w, tmp);
      be_.add_bias(tmp, k.proj_b);
      be_.add(x, tmp, x);
      be_.layer_norm(x, k.norm2_w, k.norm2_b, xn, 1e-6f);
      be_.linear(xn, k.fc1_w, mlp);
      be_.add_bias(mlp, k.fc1_b);
      be_.gelu(mlp, mlp, c_.tanh_gelu);
      be_.linear(mlp, k.fc2_w, tmp);
      be_.add_bias(tmp, k.fc2_b);
      be_.add(x, tmp, x);
    }
    be_.layer_norm(x, merger_norm_w_, merger_norm_b_, xn, 1e-6f);
    const int64_t MC = C * m * m;
    Tensor grouped = xn.reshape({merged, MC}), hidden = scratch(3, merged, MC);  // qkv's space is free now
    be_.linear(grouped, merger_fc1_w_, hidden);
    be_.add_bias(hidden, merger_fc1_b_);
    be_.gelu(hidden, hidden, /*tanh_approx=*/false);  // nn.GELU(): exact
    be_.linear(hidden, merger_fc2_w_, out);
    be_.add_bias(out, merger_fc2_b_);
  }

 private:
  // Scratch for images of up to `patches` patches (grown, never shrunk).
  void reserve(int64_t patches, int32_t frames) {
    const int64_t C = c_.hidden;
    const int64_t cols[7] = {patch_dim(), C, C, std::max(3 * C, C), C, C, c_.intermediate};
    const size_t esz = dtype_size(be_.activation_dtype());
    if (patches > capacity_) {
      scratch_.clear();
      for (int64_t w : cols) scratch_.push_back(be_.alloc(static_cast<size_t>(patches * w) * esz));
      capacity_ = patches;
    }
    const size_t ints = static_cast<size_t>(2 * patches + frames + 1);
    if (index_buf_.bytes() < ints * sizeof(int32_t)) index_buf_ = be_.alloc(ints * sizeof(int32_t));
  }

  VisionConfig c_;
  Backend& be_;
  WeightStore ws_;
  DType wdt_;
  Tensor patch_w_, patch_b_;
  std::vector<float> pos_table_;  // [num_positions, C] on the host: resampled per image there
  std::vector<Block> blocks_;
  Tensor merger_norm_w_, merger_norm_b_, merger_fc1_w_, merger_fc1_b_, merger_fc2_w_, merger_fc2_b_;
  Buffer table_buf_;
  Tensor axes_, inv_freq_;
  std::vector<Buffer> scratch_;
  Buffer index_buf_;
  int64_t capacity_ = 0;
};

}  // namespace

std::unique_ptr<VisionEncoder> load_vision_encoder(const Checkpoint& ckpt, Backend& backend) {
  const std::string file = ckpt.dir() + "/config.json";
  const json top = parse_config_object(read_text_file(file, 16 << 20), file);
  const json* vc = ConfigReader::get(top, "vision_config");
  if (vc == nullptr || !vc->is_object()) return nullptr;
  auto enc = std::make_unique<Qwen3_5Vision>(read_vision_config(*vc), ckpt, backend);
  if (const auto missing = unsupported_ops(backend, enc->required_ops()); !missing.empty()) {
    std::string names;
    for (const OpUse& u : missing) names += std::string(names.empty() ? "" : ", ") + op_name(u.op);
    throw Error("the vision tower needs ops that the " + backend.name() + " backend lacks: " + names +
                "; serve text only with --limit-mm-per-prompt '{\"image\": 0}' or use another --device");
  }
  return enc;
}

}  // namespace pagoda
