// The HTTP front: cpp-httplib with a large worker pool (one thread per open connection, so streams
// never wait for one another), API-key check, OpenAI error objects for every failure, the routes.
#pragma once

#include <memory>

#include "server/server_context.h"

namespace pagoda::server {

class HttpServer {
 public:
  explicit HttpServer(ServerContext ctx);
  ~HttpServer();

  // Binds host:port (port 0 = any free port) and returns the port. Throws pagoda::Error.
  int bind();
  // Serves until stop(); returns once every connection is done.
  void run();
  // Stops accepting; run() returns after the handlers in flight end.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server
