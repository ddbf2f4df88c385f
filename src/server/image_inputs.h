// Images in chat requests (docs/vision.md): each image part's URL (a data: URI; a file under
// --allowed-local-media-path; an http(s) URL on a host of --allowed-media-domains) read with its
// size bounded, decoded (media/image_decode.h) and preprocessed as the model's image processor does
// (media/image_preprocess.h) into what the engine takes (engine/multimodal.h); and the prompt's one
// placeholder token per image expanded to the image's merged-token count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/multimodal.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"

namespace pagoda::server {

struct MediaOptions {
  // --allowed-local-media-path: file:// URLs are read only under this directory ("" = none are).
  std::string allowed_local_media_path;
  // --allowed-media-domains: http(s) URLs are fetched only from these hosts (empty = none are).
  std::vector<std::string> allowed_media_domains;
  ImageLimits limits;  // per image: encoded bytes, pixels, sides
};

class ImageLoader {
 public:
  // The model directory's preprocessor_config.json; the decoder's image token and merge size.
  ImageLoader(const std::string& model_dir, int32_t image_token_id, int32_t max_images, MediaOptions options);

  int32_t image_token_id() const { return image_token_id_; }
  int32_t max_images() const { return max_images_; }
  // One image part's URL → the engine's input. Throws ApiError 400 naming `key` for a URL it may not
  // read, an image over a limit, or bytes that are not an image.
  std::shared_ptr<ImageInput> load(const std::string& url, const std::string& key) const;
  // Replaces the k-th `image_token_id` of `ids` by images[k]->num_tokens copies of it. Throws
  // ApiError 400 when the chat template placed another number of image tokens than images.
  void expand_placeholders(std::vector<int32_t>& ids, const std::vector<std::shared_ptr<ImageInput>>& images) const;

 private:
  std::vector<uint8_t> read_bytes(const std::string& url, const std::string& key) const;

  Qwen2VLImageConfig processor_;
  int32_t image_token_id_;
  int32_t max_images_;
  MediaOptions options_;
};

}  // namespace pagoda::server
