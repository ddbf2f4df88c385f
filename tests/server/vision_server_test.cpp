// Images in, served (docs/vision.md): `pagoda serve` on the tiny multimodal Qwen3.5 fixture, chat
// messages of text and base64 images through the official openai client (vision_test.mjs) answer
// transformers' greedy tokens for the fixture's reference prompts, with prefix-cache hits on a
// repeated image and the same tokens with the cache off; hostile images are refused with a 400
// quickly and with the server's memory bounded; a text-only server refuses images.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "../model/vision_fixture.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

namespace fs = std::filesystem;

// Bytes 0-255 as single tokens (no merges: each capital letter is its own id), unused ids to 499,
// then added tokens; 507-509 are the fixture's <|vision_start|>, <|vision_end|>, <|image_pad|>.
nlohmann::json vision_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_level::byte_to_utf8(static_cast<uint8_t>(b)))] = id++;
  for (; id < 500; ++id) vocab["unused" + std::to_string(id)] = id;
  const std::vector<std::string> added = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",  "<|pad_3|>",
                                          "<|pad_4|>",     "<|pad_5|>",    "<|pad_6|>",   "<|vision_start|>",
                                          "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|pad_11|>"};
  nlohmann::json added_tokens = nlohmann::json::array();
  for (const std::string& content : added)
    added_tokens.push_back({{"id", id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                            {"rstrip", false}, {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added_tokens},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab},
                     {"merges", nlohmann::json::array()}}}};
}

// The user's parts in order, an image as Qwen's templates render it; no role headers, so that the
// prompt ids are exactly the reference's.
constexpr const char* kTemplate =
    "{%- for message in messages -%}{%- if message.content is string -%}{{ message.content }}{%- else -%}"
    "{%- for item in message.content -%}{%- if item.type == 'image' or 'image_url' in item -%}"
    "<|vision_start|><|image_pad|><|vision_end|>{%- elif item.type == 'text' -%}{{ item.text }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{%- endfor -%}";

struct VisionModelDir {
  VisionModelDir() {
    std::string tmpl = (fs::temp_directory_path() / "pagoda-vision-XXXXXX").string();
    path = mkdtemp(tmpl.data());
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json"})
      fs::create_symlink(fs::path(vision_test::fixture_dir()) / f, fs::path(path) / f);
    write_file(path + "/tokenizer.json", vision_tokenizer_json().dump());
    write_file(path + "/tokenizer_config.json",
               nlohmann::json{{"chat_template", kTemplate}, {"eos_token", "<|im_end|>"}, {"bos_token", nullptr}}.dump());
  }
  ~VisionModelDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

// Reference case `index` as message parts: runs of letter ids as text, each image's run as the file.
nlohmann::json case_parts(const nlohmann::json& ref, size_t index) {
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

std::string base64_encode(const std::string& in) {
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

uint32_t crc32_of(const std::string& bytes) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

std::string data_uri(const std::string& file, const std::string& type) {
  return "data:" + type + ";base64," + base64_encode(read_file(file));
}

int64_t vm_kib(int pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size()));
  return -1;
}

TEST(ServerVision, ImagesThroughTheOpenAiClientAnswerTransformersTokensWithCacheHits) {
  const VisionModelDir dir;
  const nlohmann::json ref = vision_test::reference();
  const std::vector<size_t> which = {4, 5};  // the cases written in letters
  nlohmann::json cases = nlohmann::json::array();
  for (size_t i : which)
    cases.push_back({{"parts", case_parts(ref, i)}, {"max_tokens", ref.at("cases").at(i).at("generated_ids").size()}});
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching on" : "prefix caching off");
    ServerProcess s;
    std::vector<std::string> args = {"--api-key", "k", "--served-model-name", "vis", "--max-model-len", "256",
                                     "--enable-prompt-tokens-details"};
    if (!caching) args.push_back("--no-enable-prefix-caching");
    ASSERT_TRUE(s.start(dir.path, args)) << s.log();
    const CommandResult r = run_command("PAGODA_CASES='" + cases.dump() + "' node " +
                                        source_path("tests/server/vision_test.mjs") + " " + std::to_string(s.port()) +
                                        " k vis 2>&1");
    ASSERT_EQ(r.code, 0) << r.out << s.log();
    const size_t at = r.out.find("RESULTS ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const nlohmann::json got = nlohmann::json::parse(r.out.substr(at + 8, r.out.find('\n', at) - at - 8));
    ASSERT_EQ(got.size(), which.size() + 1);
    for (size_t k = 0; k < which.size(); ++k) {
      const auto& c = ref.at("cases").at(which[k]);
      EXPECT_EQ(got[k]["prompt"], c.at("prompt_ids")) << "the server's prompt ids, placeholders expanded";
      EXPECT_EQ(got[k]["tokens"], c.at("generated_ids")) << "case " << which[k];
    }
    const nlohmann::json& again = got.back();
    EXPECT_EQ(again["tokens"], ref.at("cases").at(which[0]).at("generated_ids"));
    EXPECT_EQ(again["cached"].get<int>(), caching ? 16 : 0) << "the repeated image's first block";
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
}

TEST(ServerVision, HostileImagesAreRefusedFastWithMemoryBounded) {
  const VisionModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--limit-mm-per-prompt",
                                 "{\"image\": 4}"}))
      << s.log();
  auto chat = [&](const nlohmann::json& parts) {
    const nlohmann::json body = {{"model", "vis"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", parts}}}}};
    return s.request("POST", "/v1/chat/completions", body.dump(), {});
  };
  auto image = [](const std::string& url) { return nlohmann::json{{"type", "image_url"}, {"image_url", {{"url", url}}}}; };
  const std::string png = vision_test::fixture_dir() + "/images/a_64x96.png";
  // A good image first: the server answers it (and has its steady memory after).
  HttpResult ok = chat({{{"type", "text"}, {"text", "AB"}}, image(data_uri(png, "image/png"))});
  ASSERT_EQ(ok.status, 200) << ok.body;
  const int64_t rss_before = vm_kib(s.pid(), "VmRSS:");

  std::string bytes = read_file(png);
  // A PNG declaring 100000 x 100000 pixels (its IHDR rewritten, CRC fixed).
  std::string huge = bytes;
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) huge[at + static_cast<size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  };
  put32(16, 100000);
  put32(20, 100000);
  put32(29, crc32_of(huge.substr(12, 17)));
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"truncated", {image("data:image/png;base64," + base64_encode(bytes.substr(0, bytes.size() / 2)))}},
      {"not an image", {image("data:image/png;base64," + base64_encode(std::string(4096, 'x')))}},
      {"bad base64", {image("data:image/png;base64,@@@@")}},
      {"100000 x 100000 declared", {image("data:image/png;base64," + base64_encode(huge))}},
      {"a file:// URL without --allowed-local-media-path", {image("file://" + png)}},
      {"an http URL without --allowed-media-domains", {image("http://127.0.0.1:1/x.png")}},
      {"five images over a limit of four", nlohmann::json::array()},
      {"thousands of image parts", nlohmann::json::array()},
  };
  for (auto [what, parts] : bad) {
    SCOPED_TRACE(what);
    if (what == "five images over a limit of four")
      for (int i = 0; i < 5; ++i) parts.push_back(image(data_uri(png, "image/png")));
    if (what == "thousands of image parts")
      for (int i = 0; i < 3000; ++i) parts.push_back(image("data:image/png;base64,AAAA"));
    const auto t0 = std::chrono::steady_clock::now();
    const HttpResult r = chat(parts);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("messages[0].content"), std::string::npos) << "the error names the part: " << r.body;
    EXPECT_LT(secs, 2.0);
  }
  const int64_t peak_growth_mib = (vm_kib(s.pid(), "VmHWM:") - rss_before) / 1024;
  EXPECT_LT(peak_growth_mib, 64) << "the server's peak memory grew by " << peak_growth_mib << " MiB";
  // Still serving.
  ok = chat({{{"type", "text"}, {"text", "AB"}}, image(data_uri(png, "image/png"))});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServerVision, ATextOnlyServerRefusesImages) {
  const VisionModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--limit-mm-per-prompt",
                                 "{\"image\": 0}"}))
      << s.log();
  const nlohmann::json body = {
      {"model", "vis"}, {"max_tokens", 2},
      {"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}}}}}}}};
  const HttpResult r = s.request("POST", "/v1/chat/completions", body.dump(), {});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("--limit-mm-per-prompt is 0"), std::string::npos) << r.body;
  const HttpResult text = s.request(
      "POST", "/v1/chat/completions",
      nlohmann::json{{"model", "vis"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "AB"}}}}}.dump(), {});
  EXPECT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
