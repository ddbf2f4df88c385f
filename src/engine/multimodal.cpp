// Placing a prompt's images and computing its multimodal rotary positions (multimodal.h).
#include "engine/multimodal.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace pagoda {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t image_hash(int32_t grid_t, int32_t grid_h, int32_t grid_w, std::span<const float> pixels) {
  uint64_t h = mix((static_cast<uint64_t>(static_cast<uint32_t>(grid_t)) << 42) ^
                   (static_cast<uint64_t>(static_cast<uint32_t>(grid_h)) << 21) ^ static_cast<uint32_t>(grid_w));
  for (size_t i = 0; i < pixels.size(); i += 2) {
    uint32_t a = 0, b = 0;
    std::memcpy(&a, &pixels[i], sizeof a);
    if (i + 1 < pixels.size()) std::memcpy(&b, &pixels[i + 1], sizeof b);
    h = mix(h ^ ((static_cast<uint64_t>(a) << 32) | b));
  }
  return mix(h ^ pixels.size());
}

std::shared_ptr<const MultimodalPrompt> make_multimodal_prompt(
    std::span<const int32_t> prompt, std::vector<std::shared_ptr<ImageInput>> images, int32_t image_token_id,
    int32_t spatial_merge_size) {
  const auto n = static_cast<int32_t>(prompt.size());
  const int32_t m = std::max(spatial_merge_size, 1);
  auto mm = std::make_shared<MultimodalPrompt>();
  mm->num_prompt = n;
  mm->positions.assign(static_cast<size_t>(3) * static_cast<size_t>(n), 0);
  mm->cache_tokens.assign(prompt.begin(), prompt.end());
  auto set = [&](int32_t i, int32_t t, int32_t h, int32_t w) {
    mm->positions[static_cast<size_t>(i)] = t;
    mm->positions[static_cast<size_t>(n + i)] = h;
    mm->positions[static_cast<size_t>(2 * n + i)] = w;
  };
  int32_t pos = 0;  // the next text position
  size_t next_image = 0;
  for (int32_t i = 0; i < n;) {
    if (prompt[static_cast<size_t>(i)] != image_token_id) {
      set(i, pos, pos, pos);
      ++pos, ++i;
      continue;
    }
    int32_t run = 0;
    while (i + run < n && prompt[static_cast<size_t>(i + run)] == image_token_id) ++run;
    if (next_image >= images.size())
      throw Error("the prompt has more image placeholder runs than images (" + std::to_string(images.size()) + ")");
    ImageInput& img = *images[next_image++];
    const int32_t rows = img.grid_h / m, cols = img.grid_w / m, frames = img.grid_t;
    if (img.num_tokens != rows * cols * frames || run != img.num_tokens)
      throw Error("image " + std::to_string(next_image) + " has " + std::to_string(img.num_tokens) +
                  " merged tokens but its placeholder run in the prompt has " + std::to_string(run));
    img.offset = i;
    for (int32_t k = 0; k < run; ++k) {
      const int32_t f = k / (rows * cols), r = (k / cols) % rows, c = k % cols;
      set(i + k, pos + f, pos + r, pos + c);
      // A negative key: token ids are never negative, and (hash, index) rarely meet in 31 bits.
      const uint64_t key = mix(img.hash ^ mix(static_cast<uint64_t>(k)));
      mm->cache_tokens[static_cast<size_t>(i + k)] = -1 - static_cast<int32_t>(key & 0x7fffffffU);
    }
    pos += std::max(rows, cols);
    i += run;
  }
  if (next_image != images.size())
    throw Error("the prompt has " + std::to_string(next_image) + " image placeholder runs but " +
                std::to_string(images.size()) + " images");
  mm->rope_delta = pos - n;
  mm->images.assign(images.begin(), images.end());
  return mm;
}

}  // namespace pagoda
