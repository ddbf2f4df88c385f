// Raw HTTP over a loopback socket for the reliability tests: what a hostile or broken client
// sends (byte by byte, chunked, compressed, oversized), and the server's answer as it comes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zlib.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <algorithm>
#include <vector>

namespace pagoda::server::test {

// Latency bounds are asserted where timings mean something: not under AddressSanitizer, which
// slows every allocation several times (the CI runs the suite both ways).
// Resident memory likewise: ASan's allocator keeps freed memory in its quarantine by design.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kTimingsMeaningful = false;
inline constexpr bool kRssMeaningful = false;
#else
inline constexpr bool kTimingsMeaningful = true;
inline constexpr bool kRssMeaningful = true;
#endif

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The 99th percentile of `xs` (the slowest of fewer than 100).
inline double p99(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0 : xs[std::min(xs.size() - 1, xs.size() * 99 / 100)];
}

class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConn() { close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Half-close: no more bytes from this side; the server's answer can still be read.
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // Sends everything; false once the server has closed or reset the connection.
  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until the server closes, `limit` bytes arrived, or `timeout` passes.
  std::string read_all(std::chrono::milliseconds timeout, size_t limit = size_t{64} << 20) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    while (out.size() < limit) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  // Reads one response whose end is known from Content-Length (the connection may stay open).
  std::string read_response(std::chrono::milliseconds timeout) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    for (;;) {
      const size_t head_end = out.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t cl = out.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) {
          const size_t len = std::stoul(out.substr(cl + 16));
          if (out.size() >= head_end + 4 + len) return out;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
};

// "HTTP/1.1 413 ..." -> 413; 0 when there is no status line.
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

inline std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

inline std::string post_request(const std::string& path, const std::string& body,
                                const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

// `size` bytes of `byte`, gzip-compressed as a stream (never held uncompressed).
inline std::string gzip_of_repeated(char byte, size_t size) {
  z_stream zs{};
  deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string block(size_t{1} << 20, byte), out;
  char buf[1 << 16];
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(block.size(), size - done);
    done += n;
    zs.next_in = reinterpret_cast<Bytef*>(block.data());
    zs.avail_in = static_cast<uInt>(n);
    const int flush = done == size ? Z_FINISH : Z_NO_FLUSH;
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf);
      zs.avail_out = sizeof buf;
      deflate(&zs, flush);
      out.append(buf, sizeof buf - zs.avail_out);
    } while (zs.avail_out == 0);
  }
  deflateEnd(&zs);
  return out;
}

// `text` gzip-compressed as one member.
inline std::string gzip_of(const std::string& text) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, text.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(out.size() - zs.avail_out);
  deflateEnd(&zs);
  return out;
}

// Resident memory of a process in KiB (VmRSS), -1 when unknown.
inline long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

}  // namespace pagoda::server::test
