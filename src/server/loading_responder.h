// The port while the model is fetched and loaded (minutes for a large one): every request gets 503
// with Retry-After, so a readiness probe or a load balancer sees a server that is not ready yet
// rather than a refused connection (which reads as a crash, and restarts the pod). When the engine
// is up, the listening socket itself passes to the HTTP server (HttpServer::adopt): no moment
// without a listener, and connections waiting in the backlog are served by the real routes.
// Plain HTTP only: with TLS the port opens once the model is loaded, as before.
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace pagoda::server {

class LoadingResponder {
 public:
  // Binds host:port (0 = any free port; SO_REUSEADDR, as HttpServer::bind) and starts answering.
  // Throws pagoda::Error naming the address when it cannot listen there.
  LoadingResponder(const std::string& host, int port);
  ~LoadingResponder();  // closes the socket unless release() took it
  LoadingResponder(const LoadingResponder&) = delete;
  LoadingResponder& operator=(const LoadingResponder&) = delete;

  int port() const { return port_; }
  // Stops answering and hands over the listening socket (the caller owns it now).
  int release();

 private:
  void run();
  void stop();

  int fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};  // a pipe: its read end in the poll set wakes the thread to stop
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace pagoda::server
