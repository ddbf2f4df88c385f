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

// GET `url` into memory for a client's media (an image URL): no redirects (an allow-list of hosts
// must hold for where the bytes come from), at most `max_bytes`, at most `timeout_s` seconds in all.
// Throws HttpStatusError for a status other than 2xx, pagoda::Error for the rest, naming the URL.
std::string http_get_bounded(const std::string& url, size_t max_bytes, long timeout_s);

// GET `url` into `dest`: the bytes go to `dest`.incomplete first, which a later call continues
// with a Range request (a server that ignores it starts the file over), and are renamed to `dest`
// once whole. A cut connection is retried a few times, each continuing where the last stopped.
// One progress line on stderr at most every `progress_interval_s` seconds, and one at the end.
void http_download(const std::string& url, const HttpAuth& auth, const std::filesystem::path& dest,
                   const std::string& label, double progress_interval_s = 1.0);

}  // namespace pagoda::hub
