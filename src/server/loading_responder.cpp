#include "server/loading_responder.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "core/error.h"

namespace pagoda::server {
namespace {

const std::string& loading_reply() {
  static const std::string reply = [] {
    const std::string body =
        R"({"error":{"message":"the model is loading; retry shortly","type":"server_error","param":null,)"
        R"("code":"service_unavailable"}})";
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n"
           "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return reply;
}

// Reads the request head (bounded: 16 KiB, half a second) so that the client sees its answer
// rather than a reset, then answers 503 and closes.
void answer(int conn) {
  timeval tv{0, 500000};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char buf[4096];
  std::string head;
  while (head.size() < 16384 && head.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = recv(conn, buf, sizeof buf, 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  const std::string& reply = loading_reply();
  const char* p = reply.data();
  size_t left = reply.size();
  while (left > 0) {
    const ssize_t n = send(conn, p, left, MSG_NOSIGNAL);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
  close(conn);
}

}  // namespace

LoadingResponder::LoadingResponder(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  check(rc == 0 && res != nullptr, "cannot resolve --host " + host + ": " + gai_strerror(rc));
  fd_ = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd_ >= 0) setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool bound = fd_ >= 0 && ::bind(fd_, res->ai_addr, res->ai_addrlen) == 0;
  const int err = errno;
  freeaddrinfo(res);
  if (!bound || listen(fd_, SOMAXCONN) != 0) {
    if (fd_ >= 0) close(fd_);
    if (bound || err != EADDRINUSE)
      throw Error("cannot listen on " + host + ":" + service + ": " + std::strerror(errno));
    throw Error("port " + service + " on " + host +
                " is in use (another server is listening there): choose another --port or stop that server");
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  check(pipe2(wake_, O_CLOEXEC) == 0, std::string("loading responder: pipe: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

LoadingResponder::~LoadingResponder() {
  stop();
  if (fd_ >= 0) close(fd_);
}

void LoadingResponder::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const char b = 1;
  (void)!write(wake_[1], &b, 1);
  thread_.join();
  close(wake_[0]);
  close(wake_[1]);
}

int LoadingResponder::release() {
  stop();
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void LoadingResponder::run() {
  while (!stopping_) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, 1000) <= 0) continue;
    if (fds[1].revents != 0 || stopping_) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn >= 0) answer(conn);
  }
}

}  // namespace pagoda::server
