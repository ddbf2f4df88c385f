#include "server/image_inputs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>

#include "core/error.h"
#include "io/hub_http.h"
#include "server/api_error.h"

namespace pagoda::server {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The host of an http(s) URL, lower-cased, without user info or port.
std::string url_host(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  std::string rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const size_t at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest.front() == '[') return "";  // IP literals are not on an allow-list of names
  rest = rest.substr(0, rest.find(':'));
  std::transform(rest.begin(), rest.end(), rest.begin(), [](unsigned char c) { return std::tolower(c); });
  return rest;
}

// A URL shown in an error: data URIs cut after their media type.
std::string shown(const std::string& url) {
  if (starts_with(url, "data:")) return url.substr(0, std::min<size_t>(url.find(','), 40)) + ",...";
  return url.size() > 120 ? url.substr(0, 120) + "..." : url;
}

}  // namespace

ImageLoader::ImageLoader(const std::string& model_dir, int32_t image_token_id, int32_t max_images,
                         MediaOptions options)
    : processor_(Qwen2VLImageConfig::from_model_dir(model_dir)),
      image_token_id_(image_token_id),
      max_images_(max_images),
      options_(std::move(options)) {}

std::vector<uint8_t> ImageLoader::read_bytes(const std::string& url, const std::string& key) const {
  const ImageLimits& lim = options_.limits;
  if (starts_with(url, "data:")) {
    try {
      return data_uri_bytes(url, lim);
    } catch (const Error& e) {
      throw bad_request(key + ": " + e.what(), key);
    }
  }
  if (starts_with(url, "file://")) {
    if (options_.allowed_local_media_path.empty())
      throw bad_request(key + ": file:// image URLs are refused; start the server with --allowed-local-media-path DIR "
                              "to serve files under DIR",
                        key);
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path root = fs::weakly_canonical(options_.allowed_local_media_path, ec);
    const fs::path file = fs::weakly_canonical(url.substr(7), ec);
    const auto [r, f] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
    if (ec || r != root.end() || !fs::is_regular_file(file, ec))
      throw bad_request(key + ": " + shown(url) + " is not a file under --allowed-local-media-path", key);
    const auto size = fs::file_size(file, ec);
    if (ec || size > lim.max_bytes)
      throw bad_request(key + ": " + shown(url) + " has more than " + std::to_string(lim.max_bytes) + " bytes", key);
    std::ifstream in(file, std::ios::binary);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
    if (!in) throw bad_request(key + ": " + shown(url) + " could not be read", key);
    return bytes;
  }
  if (starts_with(url, "http://") || starts_with(url, "https://")) {
    const std::string host = url_host(url);
    const auto& allowed = options_.allowed_media_domains;
    if (host.empty() || std::find(allowed.begin(), allowed.end(), host) == allowed.end())
      throw bad_request(key + ": images are fetched only from the hosts of --allowed-media-domains" +
                            (allowed.empty() ? std::string(" (none given); send the image as a data: URI")
                                             : std::string("; '") + host + "' is not one of them"),
                        key);
    try {
      // vLLM's VLLM_IMAGE_FETCH_TIMEOUT default: 5 s, redirects not followed (the allow-list holds).
      const std::string body = hub::http_get_bounded(url, lim.max_bytes, 5);
      return std::vector<uint8_t>(body.begin(), body.end());
    } catch (const Error& e) {
      throw bad_request(key + ": fetching " + shown(url) + " failed: " + e.what(), key);
    }
  }
  throw bad_request(key + ": an image URL must be a data: URI (data:image/png;base64,...), an http(s) URL or a "
                          "file:// URL; got " + shown(url),
                    key);
}

std::shared_ptr<ImageInput> ImageLoader::load(const std::string& url, const std::string& key) const {
  const std::vector<uint8_t> bytes = read_bytes(url, key);
  ImagePatches patches;
  try {
    DecodeOptions opt;
    opt.limits = options_.limits;
    const RgbImage rgb = decode_image(bytes, opt);
    patches = qwen2vl_preprocess(rgb, processor_);
  } catch (const Error& e) {
    throw bad_request(key + ": " + e.what(), key);
  }
  auto img = std::make_shared<ImageInput>();
  img->grid_t = patches.grid.t;
  img->grid_h = patches.grid.h;
  img->grid_w = patches.grid.w;
  img->patch_dim = patches.patch_dim;
  img->num_tokens = static_cast<int32_t>(patches.token_count);
  img->pixel_values = std::move(patches.pixel_values);
  img->hash = image_hash(img->grid_t, img->grid_h, img->grid_w, img->pixel_values);
  return img;
}

void ImageLoader::expand_placeholders(std::vector<int32_t>& ids,
                                      const std::vector<std::shared_ptr<ImageInput>>& images) const {
  const auto placed = static_cast<size_t>(std::count(ids.begin(), ids.end(), image_token_id_));
  if (placed != images.size())
    throw bad_request("the chat template placed " + std::to_string(placed) + " image tokens for " +
                          std::to_string(images.size()) + " images; it must render each image part once",
                      "messages");
  std::vector<int32_t> out;
  size_t total = ids.size();
  for (const auto& img : images) total += static_cast<size_t>(img->num_tokens) - 1;
  out.reserve(total);
  size_t k = 0;
  for (int32_t id : ids) {
    if (id != image_token_id_) {
      out.push_back(id);
      continue;
    }
    out.insert(out.end(), static_cast<size_t>(images[k++]->num_tokens), image_token_id_);
  }
  ids = std::move(out);
}

}  // namespace pagoda::server
