// The two HTTP requests of a Hub download, over libcurl: a small JSON answer read into memory,
// and a file written to disk, continued after a cut (Range) and reported on stderr as it goes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace pagoda::hub {

// The server answered, with a status that is not a success: the caller says what it means
// (401 a token, 404 a missing model) since only it knows what was asked for.
class HttpStatusError : public Error {
 public:
  HttpStatusError(long http_status, const std::string& from_url)
      : Error("HTTP " + std::to_string(http_status) + " from " + from_url), status(http_status), url(from_url) {}
  long status;
  std::string url;
};

struct HttpAuth {
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty
};

// GET `url` into memory. Throws HttpStatusError for a status other than 2xx, pagoda::Error naming
// the URL for a network failure or an answer larger than `max_bytes`.
std::string http_get_text(const std::string& url, const HttpAuth& auth, size_t max_bytes);

// GET `url` into `dest`: the bytes go to `dest`.incomplete first, which a later call continues
// with a Range request (a server that ignores it starts the file over), and are renamed to `dest`
// once whole. A cut connection is retried a few times, each continuing where the last stopped.
// One progress line on stderr at most every `progress_interval_s` seconds, and one at the end.
void http_download(const std::string& url, const HttpAuth& auth, const std::filesystem::path& dest,
                   const std::string& label, double progress_interval_s = 1.0);

}  // namespace pagoda::hub
