#include "io/hub_http.h"

#include <algorithm>

#if PAGODA_HAS_CURL
#include <curl/curl.h>
#endif

#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <utility>
#include <thread>

namespace pagoda::hub {
namespace fs = std::filesystem;

#if PAGODA_HAS_CURL
namespace {

using Clock = std::chrono::steady_clock;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Easy {
  CURL* h = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  Easy(const std::string& url, const HttpAuth& auth) {
    global_init();
    h = curl_easy_init();
    check_invariant(h != nullptr, "curl_easy_init failed");
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);  // /resolve/ answers with a redirect to the file's store
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    // A stalled transfer (under 1 byte/s for a minute) fails, and is retried, instead of hanging.
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "pagoda/" PAGODA_VERSION);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    // curl sends the token to the Hub only: not to another host a redirect leads to.
    if (!auth.token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + auth.token).c_str());
  }
  ~Easy() {
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
  }
  Easy(const Easy&) = delete;
  Easy& operator=(const Easy&) = delete;
  void add_header(const std::string& line) { headers = curl_slist_append(headers, line.c_str()); }
  CURLcode perform() {
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    return curl_easy_perform(h);
  }
  long status() const {
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    return code;
  }
  std::string failure(CURLcode rc) const { return error[0] ? std::string(error) : std::string(curl_easy_strerror(rc)); }
};

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

// One attempt at the file: what the server said and what reached the disk.
struct Transfer {
  Easy* easy = nullptr;
  fs::path part;
  int64_t have = 0;        // bytes of the file on disk (continued from, then grown)
  int64_t total = -1;      // the whole file's size, when the server said it
  int64_t start = 0;       // where this attempt's bytes begin in the file
  int64_t range_start = -1;  // Content-Range's first byte of the answer being read
  int64_t range_total = -1;
  std::FILE* out = nullptr;
  bool refused = false;    // not 200/206: the body is an error page, never written
  bool misplaced = false;  // a 206 that does not continue the file where it stops
  std::string label;
  double interval_s = 1.0;
  Clock::time_point began, last_line;
  bool printed = false;

  void progress(bool force) {
    const auto now = Clock::now();
    if (!force && std::chrono::duration<double>(now - last_line).count() < interval_s) return;
    last_line = now;
    printed = true;
    const double secs = std::max(std::chrono::duration<double>(now - began).count(), 1e-6);
    const std::string rate = human_bytes(static_cast<double>(have - start) / secs) + "/s";
    if (total > 0)
      std::fprintf(stderr, "[pagoda] downloading %s: %s / %s (%.0f%%), %s\n", label.c_str(),
                   human_bytes(static_cast<double>(have)).c_str(), human_bytes(static_cast<double>(total)).c_str(),
                   100.0 * static_cast<double>(have) / static_cast<double>(total), rate.c_str());
    else
      std::fprintf(stderr, "[pagoda] downloading %s: %s, %s\n", label.c_str(),
                   human_bytes(static_cast<double>(have)).c_str(), rate.c_str());
  }
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a redirect): forget the last one's
    t->range_start = t->range_total = -1;
  } else if (line.size() > 14 && (line.rfind("Content-Range:", 0) == 0 || line.rfind("content-range:", 0) == 0)) {
    long long first = -1, last = -1, whole = -1;
    if (std::sscanf(line.c_str() + 14, " bytes %lld-%lld/%lld", &first, &last, &whole) >= 2) {
      t->range_start = first;
      t->range_total = whole;
    }
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->out && !t->refused) {
    const long status = t->easy->status();
    if (status == 206 && t->range_start == t->have) {
      t->out = std::fopen(t->part.c_str(), "ab");
      if (t->range_total > 0) t->total = t->range_total;
    } else if (status == 206) {
      t->misplaced = true;
      return 0;
    } else if (status == 200) {  // the server ignored the Range: the file starts over
      t->out = std::fopen(t->part.c_str(), "wb");
      t->have = 0;
      curl_off_t length = -1;
      curl_easy_getinfo(t->easy->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (length >= 0) t->total = length;
    } else {
      t->refused = true;
    }
    if (!t->refused && !t->out) return 0;  // cannot open the file: a write error
    t->start = t->have;
  }
  if (t->refused) return bytes;
  if (std::fwrite(data, 1, bytes, t->out) != bytes) return 0;
  t->have += static_cast<int64_t>(bytes);
  t->progress(false);
  return bytes;
}

int64_t size_on_disk(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

}  // namespace

namespace {

// The body of `easy`'s GET in memory, stopped past `max_bytes` (too_large then).
struct MemoryGet {
  std::string text;
  size_t max_bytes = 0;
  bool too_large = false;
  CURLcode rc = CURLE_OK;

  MemoryGet(Easy& easy, size_t max) : max_bytes(max) {
    curl_easy_setopt(easy.h, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(easy.h, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
      auto* s = static_cast<MemoryGet*>(user);
      if (s->text.size() + size * n > s->max_bytes) {
        s->too_large = true;
        return 0;
      }
      s->text.append(data, size * n);
      return size * n;
    });
    rc = easy.perform();
  }
};

}  // namespace

std::string http_get_text(const std::string& url, const HttpAuth& auth, size_t max_bytes) {
  Easy easy(url, auth);
  MemoryGet get(easy, max_bytes);
  if (get.too_large)
    throw Error("the answer of " + url + " is larger than " + std::to_string(max_bytes) +
                " bytes, which is not what a Hub sends; check HF_ENDPOINT");
  if (get.rc != CURLE_OK)
    throw Error("cannot fetch " + url + ": " + easy.failure(get.rc) + "; check the network and HF_ENDPOINT");
  const long status = easy.status();
  if (status < 200 || status >= 300) throw HttpStatusError(status, url);
  return std::move(get.text);
}

std::string http_get_bounded(const std::string& url, size_t max_bytes, long timeout_s) {
  Easy easy(url, {});
  curl_easy_setopt(easy.h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy.h, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(easy.h, CURLOPT_CONNECTTIMEOUT, std::min(timeout_s, 30L));
  MemoryGet get(easy, max_bytes);
  if (get.too_large) throw Error(url + " sends more than " + std::to_string(max_bytes) + " bytes");
  if (get.rc != CURLE_OK) throw Error("cannot fetch " + url + ": " + easy.failure(get.rc));
  const long status = easy.status();
  if (status < 200 || status >= 300) throw HttpStatusError(status, url);
  return std::move(get.text);
}

void http_download(const std::string& url, const HttpAuth& auth, const fs::path& dest, const std::string& label,
                   double progress_interval_s) {
  const fs::path part = dest.string() + ".incomplete";
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    Transfer t;
    t.part = part;
    t.have = size_on_disk(part);
    t.label = label;
    t.interval_s = progress_interval_s;
    t.began = t.last_line = Clock::now();
    Easy easy(url, auth);
    t.easy = &easy;
    if (t.have > 0) easy.add_header("Range: bytes=" + std::to_string(t.have) + "-");
    curl_easy_setopt(easy.h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy.h, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(easy.h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy.h, CURLOPT_WRITEDATA, &t);
    const CURLcode rc = easy.perform();
    const bool flushed = !t.out || std::fclose(t.out) == 0;
    const long status = easy.status();
    if (rc == CURLE_OK && (status == 200 || status == 206) && !t.refused && flushed) {
      if (!fs::exists(part)) std::ofstream(part, std::ios::binary);  // an empty file: no body was written
      const int64_t size = size_on_disk(part);
      if (t.total < 0 || size == t.total) {
        t.have = size;
        t.progress(true);
        fs::rename(part, dest);
        return;
      }
    }
    if (status == 416) {  // the part is already as long as the file, or longer: start over once
      fs::remove(part);
      if (attempt < kAttempts) continue;
    }
    // A client error other than a timeout or a rate limit will not change on a retry.
    if (t.refused && status >= 400 && status < 500 && status != 408 && status != 429)
      throw HttpStatusError(status, url);
    if (t.misplaced) fs::remove(part);  // the server continued elsewhere than asked: start over
    if (attempt >= kAttempts) {
      if (t.refused) throw HttpStatusError(status, url);
      throw Error("cannot download " + url + ": " + (rc != CURLE_OK ? easy.failure(rc) : "the file came incomplete") +
                  " (" + std::to_string(kAttempts) + " attempts); run again to continue from " + part.string());
    }
    std::fprintf(stderr, "[pagoda] %s: %s; continuing (attempt %d of %d)\n", label.c_str(),
                 rc != CURLE_OK ? easy.failure(rc).c_str() : ("HTTP " + std::to_string(status)).c_str(), attempt + 1,
                 kAttempts);
    std::this_thread::sleep_for(std::chrono::milliseconds(250 << std::min(attempt - 1, 4)));
  }
}

#else  // built without libcurl: the cache still serves, downloads say how to get them

namespace {
[[noreturn]] void no_curl(const std::string& url) {
  throw Error("this pagoda was built without libcurl, so it cannot download " + url +
              "; install libcurl4-openssl-dev and rebuild (tools/setup.sh), or download the model with "
              "`hf download` and pass its directory");
}
}  // namespace

std::string http_get_text(const std::string& url, const HttpAuth&, size_t) { no_curl(url); }

std::string http_get_bounded(const std::string& url, size_t, long) { no_curl(url); }

void http_download(const std::string& url, const HttpAuth&, const fs::path&, const std::string&, double) {
  no_curl(url);
}

#endif

}  // namespace pagoda::hub
