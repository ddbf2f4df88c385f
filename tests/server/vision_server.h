// The multimodal fixture served: a model directory with the tiny multimodal Qwen3.5 and a
// byte-level tokenizer whose ids 507-509 are its vision tokens, a template that renders the parts
// inline (so prompt ids equal the reference's), and helpers for image requests. Shared by
// vision_server_test.cpp and reliability_images_test.cpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "../model/vision_fixture.h"
#include "server_harness.h"

namespace pagoda::server::test {



// Bytes 0-255 as single tokens (no merges: each capital letter is its own id), unused ids to 499,
// then added tokens; 507-509 are the fixture's <|vision_start|>, <|vision_end|>, <|image_pad|>.
inline nlohmann::json vision_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_level::byte_to_utf8(static_cast<uint8_t>(b)))] = id++;
  for (; id < 500; ++id) vocab["unused" + std::to_string(id)] = id;
  std::vector<std::pair<std::string, bool>> added;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad_3|>", "<|pad_4|>", "<|pad_5|>",
                        "<|pad_6|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|pad_11|>"})
    added.emplace_back(t, true);
  return byte_level_tokenizer_json(vocab, nlohmann::json::array(), id, added);
}

// The user's parts in order, an image as Qwen's templates render it; no role headers, so that the
// prompt ids are exactly the reference's.
inline constexpr const char* kVisionTemplate =
    "{%- for message in messages -%}{%- if message.content is string -%}{{ message.content }}{%- else -%}"
    "{%- for item in message.content -%}{%- if item.type == 'image' or 'image_url' in item -%}"
    "<|vision_start|><|image_pad|><|vision_end|>{%- elif item.type == 'text' -%}{{ item.text }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{%- endfor -%}";

struct VisionModelDir {
  VisionModelDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagoda-vision-XXXXXX").string();
    path = mkdtemp(tmpl.data());
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json"})
      std::filesystem::create_symlink(std::filesystem::path(vision_test::fixture_dir()) / f, std::filesystem::path(path) / f);
    write_file(path + "/tokenizer.json", vision_tokenizer_json().dump());
    write_file(path + "/tokenizer_config.json",
               nlohmann::json{{"chat_template", kVisionTemplate}, {"eos_token", "<|im_end|>"}, {"bos_token", nullptr}}.dump());
  }
  ~VisionModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

// Reference case `index` as message parts: runs of letter ids as text, each image's run as the file.
inline nlohmann::json case_parts(const nlohmann::json& ref, size_t index) {
  const auto& c = ref.at("cases").at(index);
  const auto pad = ref.at("config").at("image_token_id").get<int32_t>();
  const auto start = ref.at("config").at("vision_start_token_id").get<int32_t>();
  const auto end = ref.at("config").at("vision_end_token_id").get<int32_t>();
  const auto images = c.at("images").get<std::vector<int>>();
  nlohmann::json parts = nlohmann::json::array();
  std::string text;
  size_t next_image = 0;
  for (int32_t id : c.at("prompt_ids").get<std::vector<int32_t>>()) {
    if (id == start) {
      if (!text.empty()) parts.push_back({{"text", text}});
      text.clear();
      parts.push_back({{"image", vision_test::fixture_dir() + "/images/" +
                                     ref.at("images").at(static_cast<size_t>(images.at(next_image++))).at("file").get<std::string>()}});
    } else if (id != pad && id != end) {
      EXPECT_TRUE(id >= 'A' && id <= 'Z') << "a server case's text must be capital letters";
      text += static_cast<char>(id);
    }
  }
  if (!text.empty()) parts.push_back({{"text", text}});
  return parts;
}

inline std::string base64_encode(const std::string& in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

inline uint32_t crc32_of(const std::string& bytes) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

inline std::string data_uri(const std::string& file, const std::string& type) {
  return "data:" + type + ";base64," + base64_encode(read_file(file));
}

inline int64_t vm_kib(int pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size()));
  return -1;
}


}  // namespace pagoda::server::test
