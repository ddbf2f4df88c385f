// One connection: a coroutine that reads requests with their limits and deadlines, answers them,
// and drives generations to the client (whole or streamed), noticing a client that goes away.
#pragma once

#include <atomic>
#include <utility>
#include <cstdint>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>

#include "server/server_context.h"
#include "server/tls_context.h"

namespace pagoda::server {

struct SessionEnv {
  ServerContext& ctx;
  boost::asio::thread_pool& workers;  // route work that may take a while (parse, template, tokenize)
  std::atomic<int64_t>& active_requests;
  std::atomic<bool>& trim_queued;  // memory is about to be returned to the OS
  boost::asio::ssl::context* tls = nullptr;  // HTTPS when set (--ssl-certfile)
};

boost::asio::awaitable<void> serve_connection(SessionEnv& env, boost::asio::ip::tcp::socket socket);

}  // namespace pagoda::server
