#include "server/http_session.h"

#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <type_traits>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "core/log.h"
#include "server/cors.h"
#include "server/http_reader.h"
#include "server/router.h"
#include "server/sse.h"
#include "server/structured_output.h"

namespace pagoda::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;
using net::awaitable;
using net::use_awaitable;
using Clock = std::chrono::steady_clock;

namespace {

// Clamped: a timeout of 1e10 s in nanoseconds overflows 64 bits (and would expire at once).
std::chrono::steady_clock::duration seconds(double s) {
  constexpr double kLongest = 1e7;  // ~116 days: "never", as far as a connection is concerned
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::clamp(s, 0.0, kLongest)));
}

// A deadline on a socket: when it passes, the socket's pending operations are cancelled and
// expired() says why they failed. Arming again forgets an earlier expiry still in flight.
class Deadline {
 public:
  explicit Deadline(tcp::socket& socket) : state_(std::make_shared<State>(socket)) {}
  ~Deadline() { state_->socket = nullptr; }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  void arm(double secs) {
    const uint64_t epoch = ++state_->epoch;
    state_->expired = false;
    state_->timer.expires_after(seconds(secs));
    state_->timer.async_wait([s = state_, epoch](error_code ec) {
      if (ec || !s->socket || epoch != s->epoch) return;
      s->expired = true;
      error_code ignored;
      s->socket->cancel(ignored);
    });
  }
  void disarm() {
    ++state_->epoch;
    state_->timer.cancel();
  }
  bool expired() const { return state_->expired; }

 private:
  struct State {
    explicit State(tcp::socket& s) : socket(&s), timer(s.get_executor()) {}
    tcp::socket* socket;
    net::steady_timer timer;
    uint64_t epoch = 0;
    bool expired = false;
  };
  std::shared_ptr<State> state_;
};

// Wakes a connection waiting on its generation: the engine thread posts here when outputs arrive,
// the socket's readiness lands here when the client sends something or goes away.
struct Waker {
  explicit Waker(const net::any_io_executor& ex) : executor(ex), timer(ex) {}
  net::any_io_executor executor;
  net::steady_timer timer;
  std::atomic<bool> posted{false};  // one wake-up in flight at a time, however many outputs
  bool peer_event = false;
};

// Runs `fn` on the worker pool and resumes the coroutine on its own thread with the result.
// GCC 12 destroys some temporaries of a co_await full-expression twice, so the coroutines here
// take non-trivial arguments by reference to named locals, never as temporaries.
template <typename T, typename F>
awaitable<T> offload(net::thread_pool& pool, F& fn) {
  auto ex = co_await net::this_coro::executor;
  const auto* exp = &ex;  // the initiation below captures nothing with a destructor
  co_return co_await net::async_initiate<decltype(use_awaitable), void(T)>(
      [&pool, exp, &fn](auto handler) {
        net::post(pool, [ex = *exp, &fn, handler = std::move(handler)]() mutable {
          T result = fn();
          net::post(ex, [handler = std::move(handler), result = std::move(result)]() mutable {
            std::move(handler)(std::move(result));
          });
        });
      },
      use_awaitable);
}

// Resumes the coroutine on its own thread once `compile` has finished (the pool's thread only
// posts the resumption).
awaitable<void> wait_for_compile(const std::shared_ptr<GrammarCompile>& compile) {
  auto ex = co_await net::this_coro::executor;
  const auto* exp = &ex;
  co_await net::async_initiate<decltype(use_awaitable), void()>(
      [&compile, exp](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        compile->on_done([ex = *exp, h] { net::post(ex, [h]() mutable { std::move(*h)(); }); });
      },
      use_awaitable);
}

// What the socket says of the client while its generation runs, without reading anything.
enum class Peer {
  quiet,      // nothing new
  pipelined,  // bytes wait (a next request, or garbage): the client is still there
  finished,   // it sent FIN: it closed, or only shut down its sending side (half-close) and waits
  gone,       // reset, or closed both ways
};

Peer peer_state(tcp::socket& socket) {
  pollfd p{socket.native_handle(), static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return Peer::quiet;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return Peer::gone;
  if (p.revents & POLLRDHUP) return Peer::finished;
  return (p.revents & POLLIN) ? Peer::pipelined : Peer::quiet;
}

// A fresh X-Request-Id: 32 hex digits, as vLLM's uuid4().hex.
std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    uint64_t bits = rng();
    for (int i = 0; i < 16; ++i, bits >>= 4) id[half * 16 + i] = kHex[bits & 15];
  }
  return id;
}

// The client's own X-Request-Id when it is one a log line and a header can carry as it is
// (visible ASCII, at most 256 bytes); else a fresh one.
std::string request_id_for(std::string_view given) {
  if (given.empty() || given.size() > 256) return new_request_id();
  for (char c : given)
    if (c < 0x21 || c > 0x7e) return new_request_id();
  return std::string(given);
}

// Over a plain socket (HTTP) or a TLS stream on one (HTTPS). Reads and writes go through the
// stream; what concerns the socket itself (deadlines, readiness, peeking, shutdown) through raw().
template <typename Stream>
class Connection {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  Connection(SessionEnv& env, tcp::socket& socket)  // moved from
      : env_(env), limits_(env.ctx.options.http), stream_(make_stream(socket, env.tls)), deadline_(raw()) {}

  awaitable<void> run();

 private:
  static Stream make_stream(tcp::socket& socket, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      return std::move(socket);
    }
  }
  tcp::socket& raw() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }
  awaitable<bool> handshake();
  awaitable<Peer> check_peer();
  awaitable<bool> probe(const GenerationReply& g, unsigned version);
  awaitable<void> tls_close();
  awaitable<bool> read_request(bool first, HttpRequest& req, bool& keep_alive);
  awaitable<HttpReply> answer(const HttpRequest& req);
  awaitable<bool> write_reply(HttpReply& reply, bool keep_alive, bool head);
  awaitable<bool> fail(HttpReply& reply);
  awaitable<bool> drive(GenerationReply& g, bool keep_alive, unsigned version);
  awaitable<bool> write_stream_text(const std::string& text, bool chunked);
  awaitable<void> linger_close();
  void trim_memory(size_t request_bytes);
  void access_log(unsigned status);

  SessionEnv& env_;
  const HttpLimits& limits_;
  Stream stream_;
  Deadline deadline_;
  boost::beast::flat_buffer buffer_;
  bool read_a_lot_ = false;
  bool tls_closed_ = false;
  std::string peer_;  // "127.0.0.1:52514", for the access log
  // Of the request being answered: what every response to it carries (X-Request-Id, CORS), and
  // its access-log line ("POST /v1/completions HTTP/1.1"; "-" before its head was read).
  std::vector<std::pair<std::string, std::string>> request_headers_;
  std::string access_request_ = "-";
  std::string access_path_;
};

template <typename Stream>
awaitable<void> Connection<Stream>::run() {
  error_code ec;
  raw().set_option(tcp::no_delay(true), ec);
  if (const auto ep = raw().remote_endpoint(ec); !ec) {
    const std::string addr = ep.address().to_string();
    peer_ = (ep.address().is_v6() ? "[" + addr + "]" : addr) + ":" + std::to_string(ep.port());
  }
  const bool secured = co_await handshake();
  for (bool first = true; secured; first = false) {
    HttpRequest req;
    bool keep_alive = false;
    if (!co_await read_request(first, req, keep_alive)) break;
    struct Active {  // counted for a graceful shutdown, whatever leaves this scope
      std::atomic<int64_t>& n;
      explicit Active(std::atomic<int64_t>& c) : n(c) { ++n; }
      ~Active() { --n; }
    } active(env_.active_requests);
    HttpReply reply = co_await answer(req);
    const size_t request_bytes = req.body.size() + reply.body.size();
    bool keep;
    if (reply.generation) {
      keep = co_await drive(*reply.generation, keep_alive, req.version);
    } else {
      keep = co_await write_reply(reply, keep_alive, req.method == "HEAD");
    }
    trim_memory(request_bytes);
    if (!keep) break;
  }
  if (secured) co_await tls_close();
  raw().shutdown(tcp::socket::shutdown_both, ec);
  raw().close(ec);
  if (read_a_lot_) trim_memory(size_t{1} << 20);
}

// Reads one request; false when the connection is done (closed, idle, or an error already answered).
template <typename Stream>
awaitable<bool> Connection<Stream>::read_request(bool first, HttpRequest& req, bool& keep_alive) {
  error_code ec;
  // Until the head is read (an error answered before it still gets an id).
  request_headers_ = {{"X-Request-Id", new_request_id()}};
  access_request_ = "-";
  access_path_.clear();
  if (buffer_.size() == 0) {
    // Between requests a connection may idle for the keep-alive timeout; a new one gets the whole
    // request deadline for its first byte.
    deadline_.arm(first ? limits_.request_timeout_s : limits_.keep_alive_timeout_s);
    const size_t n = co_await stream_.async_read_some(buffer_.prepare(16 << 10), net::redirect_error(use_awaitable, ec));
    deadline_.disarm();
    if (ec) co_return false;
    buffer_.commit(n);
  }
  RequestParser parser;
  configure_parser(parser, limits_);
  deadline_.arm(limits_.request_timeout_s);  // the whole request, header and body
  auto timeout_or_error = [&]() -> HttpReply {
    if (deadline_.expired()) {
      HttpReply r = error_reply(ApiError(408, "the request was not received within " +
                                                  std::to_string(static_cast<int>(limits_.request_timeout_s)) +
                                                  " s (--request-timeout)", "invalid_request_error"));
      r.close = true;
      return r;
    }
    return parse_error_reply(ec);
  };
  co_await http::async_read_header(stream_, buffer_, parser, net::redirect_error(use_awaitable, ec));
  // (TLS: a client that closes without close_notify, as most do, truncates the stream.)
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
      ec == ssl::error::stream_truncated) {
    deadline_.disarm();
    co_return false;
  }
  if (ec) {
    HttpReply r = timeout_or_error();
    co_return co_await fail(r);
  }
  if (auto err = check_header(parser, limits_)) co_return co_await fail(*err);
  req = request_head(parser);
  // Behind a proxy that serves pagoda under a prefix (--root-path), routes are matched without it.
  if (const std::string& root = env_.ctx.options.root_path;
      !root.empty() && req.path.rfind(root, 0) == 0 && (req.path.size() == root.size() || req.path[root.size()] == '/'))
    req.path = req.path.size() == root.size() ? "/" : req.path.substr(root.size());
  request_headers_ = {{"X-Request-Id", request_id_for(req.header("x-request-id"))}};
  for (auto& h : cors_response_headers(env_.ctx.options.cors, req)) request_headers_.push_back(std::move(h));
  access_request_ = req.method + " " + req.target + (req.version == 10 ? " HTTP/1.0" : " HTTP/1.1");
  access_path_ = req.path;
  if (!authorized(env_.ctx, req)) {
    HttpReply r = error_reply(unauthorized(), error_shape_for(req.path));
    r.close = true;
    co_return co_await fail(r);
  }
  if (boost::beast::iequals(parser.get()[http::field::expect], "100-continue")) {
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    co_await net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                              net::redirect_error(use_awaitable, ec));
    if (ec) {
      deadline_.disarm();
      co_return false;
    }
  }
  if (!parser.is_done()) co_await http::async_read(stream_, buffer_, parser, net::redirect_error(use_awaitable, ec));
  if (ec) {
    HttpReply r = timeout_or_error();
    co_return co_await fail(r);
  }
  deadline_.disarm();
  keep_alive = parser.get().keep_alive();
  std::optional<HttpReply> body_error;
  try {
    take_body(parser, req, limits_);
  } catch (const ApiError& e) {
    body_error = error_reply(e, error_shape_for(req.path));
    body_error->close = true;
  }
  if (body_error) co_return co_await fail(*body_error);
  co_return true;
}

template <typename Stream>
awaitable<HttpReply> Connection<Stream>::answer(const HttpRequest& req) {
  HttpReply reply;
  if (is_cors_preflight(req)) co_return cors_preflight_reply(env_.ctx.options.cors, req);
  const Route* route = find_route(req.method, req.path, reply);
  if (!route) co_return reply;
  if (route->on_io_thread) co_return run_route(*route, env_.ctx, req);
  ServerContext& ctx = env_.ctx;
  // A grammar not compiled yet: the route stops at it (CompileDeferred), the connection waits for
  // the compile without holding a worker, and the route runs again with the grammar (or its error).
  std::vector<std::shared_ptr<GrammarCompile>> compiled;
  auto work = [route, &ctx, &req, &compiled]() -> HttpReply {
    DeferCompiles defer(compiled);
    try {
      return run_route(*route, ctx, req);
    } catch (const CompileDeferred& d) {
      HttpReply r;
      r.compile = d.compile;
      return r;
    }
  };
  reply = co_await offload<HttpReply>(env_.workers, work);
  while (reply.compile) {
    if (compiled.size() >= 4)  // a route asks for one grammar: more means a loop
      co_return error_reply(internal_error("the request's grammar was compiled, yet its route asked again"));
    compiled.push_back(std::move(reply.compile));
    co_await wait_for_compile(compiled.back());
    reply = co_await offload<HttpReply>(env_.workers, work);
  }
  co_return reply;
}

template <typename Stream>
awaitable<bool> Connection<Stream>::fail(HttpReply& reply) {
  deadline_.disarm();
  read_a_lot_ = reply.status == 413 || reply.status == 431;  // trimmed once the parser is gone
  co_await write_reply(reply, false, false);
  co_await linger_close();
  co_return false;
}

template <typename Stream>
awaitable<bool> Connection<Stream>::write_reply(HttpReply& reply, bool keep_alive, bool head) {
  http::response<http::string_body> res;
  res.version(11);
  res.result(static_cast<unsigned>(reply.status));
  res.set(http::field::server, "pagoda");
  res.set(http::field::content_type, reply.content_type);
  for (auto& [k, v] : reply.headers) res.set(k, v);
  for (const auto& [k, v] : request_headers_) res.set(k, v);
  res.body() = std::move(reply.body);
  res.keep_alive(keep_alive && !reply.close);
  res.prepare_payload();
  if (head) res.body().clear();  // Content-Length stays that of the GET
  error_code ec;
  deadline_.arm(limits_.write_timeout_s);
  co_await http::async_write(stream_, res, net::redirect_error(use_awaitable, ec));
  deadline_.disarm();
  access_log(static_cast<unsigned>(reply.status));
  co_return !ec && res.keep_alive();
}

// uvicorn's line, which vLLM writes for every request: 127.0.0.1:52514 - "POST /v1/completions HTTP/1.1" 200 OK
template <typename Stream>
void Connection<Stream>::access_log(unsigned status) {
  const ServerOptions& o = env_.ctx.options;
  if (!o.access_log) return;
  for (const std::string& skip : o.access_log_skip_paths)
    if (skip == access_path_) return;
  LOG_INFO(peer_ << " - \"" << access_request_ << "\" " << status << " "
                 << http::obsolete_reason(static_cast<http::status>(status)));
}

template <typename Stream>
awaitable<bool> Connection<Stream>::write_stream_text(const std::string& text, bool chunked) {
  error_code ec;
  deadline_.arm(limits_.write_timeout_s);
  if (chunked) {
    const auto chunk = http::make_chunk(net::buffer(text));
    co_await net::async_write(stream_, chunk, net::redirect_error(use_awaitable, ec));
  } else {  // HTTP/1.0: the body is what comes until the connection closes
    co_await net::async_write(stream_, net::buffer(text), net::redirect_error(use_awaitable, ec));
  }
  deadline_.disarm();
  co_return !ec;
}

// Takes the generation's outputs as the engine makes them, waiting on a timer that the engine (new
// outputs) or the socket (the client sent something or left) cancels. Once the client has sent
// more (a pipelined request, or a FIN) the socket stays readable, so from then on it is polled a
// few times a second instead of waited on: a client that hangs up is noticed whatever it sent
// before. Returns whether the connection stays open.
template <typename Stream>
awaitable<bool> Connection<Stream>::drive(GenerationReply& g, bool keep_alive, unsigned version) {
  auto waker = std::make_shared<Waker>(raw().get_executor());
  g.channel->set_notify([w = std::weak_ptr<Waker>(waker)] {
    auto s = w.lock();
    if (!s || s->posted.exchange(true)) return;
    net::post(s->executor, [s] {
      s->posted = false;
      s->timer.cancel();
    });
  });
  bool watching = false;
  auto watch = [&] {
    watching = true;
    raw().async_wait(tcp::socket::wait_read, [waker](error_code ec) {
      if (ec) return;
      waker->peer_event = true;
      waker->timer.cancel();
    });
  };
  watch();

  // HTTP/1.0 has no chunked encoding: a stream is the body until the connection closes.
  const bool chunked = version >= 11;
  if (!chunked && g.stream) keep_alive = false;
  bool ok = true;
  if (g.stream) {
    http::response<http::empty_body> res;
    res.version(11);
    res.result(http::status::ok);
    res.set(http::field::server, "pagoda");
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    for (const auto& [k, v] : request_headers_) res.set(k, v);
    res.chunked(chunked);
    res.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> sr(res);
    error_code ec;
    deadline_.arm(limits_.write_timeout_s);
    co_await http::async_write_header(stream_, sr, net::redirect_error(use_awaitable, ec));
    deadline_.disarm();
    ok = !ec;
    access_log(200);
  }
  constexpr auto kPingEvery = std::chrono::seconds(15);  // keeps proxies from closing a quiet stream
  constexpr auto kPollEvery = std::chrono::milliseconds(100);
  auto last_write = Clock::now();
  bool polling = false;            // the socket is polled on each wake-up instead of waited on
  bool half_closed = false;        // FIN seen, and the client was still there after a probe
  auto last_probe = Clock::now();
  std::vector<ChoiceOutput> items;
  bool finished = false;
  std::optional<HttpReply> whole;
  while (ok && !finished) {
    if (waker->peer_event || polling) {
      const bool event = waker->peer_event;
      waker->peer_event = false;
      if (event) watching = false;
      const Peer peer = co_await check_peer();
      if (peer == Peer::gone) {
        ok = false;
        break;
      }
      if (peer == Peer::finished && (!half_closed || Clock::now() - last_probe > kPingEvery)) {
        // A FIN alone cannot tell a client that left from one that half-closed and waits for its
        // answer: send it something harmless; a client that left answers with a reset, which the
        // next poll sees.
        if (!co_await probe(g, version)) {
          ok = false;
          break;
        }
        half_closed = true;
        last_probe = Clock::now();
      }
      if (peer == Peer::quiet && event && !polling) watch();  // woken for nothing: wait again
      else polling = true;
    }
    items.clear();
    const bool more = g.channel->poll(items);
    finished = !more;
    if (g.stream) {
      std::string text = items.empty() ? std::string() : g.on_events(items);
      if (finished) {
        const std::string err = g.channel->error();
        text += err.empty() ? g.on_end() : sse_error_event(internal_error(err), g.error_shape);
        if (g.done_marker) text += kSseDone;
      }
      if (text.empty() && Clock::now() - last_write > kPingEvery) text = kSsePing;
      if (!text.empty()) {
        ok = co_await write_stream_text(text, chunked);
        last_write = Clock::now();
      }
      if (ok && finished && chunked) {
        error_code ec;
        deadline_.arm(limits_.write_timeout_s);
        const auto last = http::make_chunk_last();
        co_await net::async_write(stream_, last, net::redirect_error(use_awaitable, ec));
        deadline_.disarm();
        ok = !ec;
      }
    } else {
      for (ChoiceOutput& o : items) g.on_output(o);
      if (finished) {
        const std::string err = g.channel->error();
        if (!err.empty()) {
          whole = error_reply(internal_error(err), g.error_shape);
        } else {
          // May build a large body: off the I/O thread. What it throws is the client's answer (an
          // exception must not escape into the worker pool).
          auto finish = [&g]() -> HttpReply {
            try {
              return json_reply(g.finish());
            } catch (const ApiError& e) {
              return error_reply(e, g.error_shape);
            } catch (const std::exception& e) {
              return error_reply(internal_error(e.what()), g.error_shape);
            }
          };
          whole = co_await offload<HttpReply>(env_.workers, finish);
        }
      }
    }
    if (!finished && items.empty()) {
      waker->timer.expires_after(polling ? std::chrono::duration_cast<Clock::duration>(kPollEvery)
                                         : std::chrono::duration_cast<Clock::duration>(kPingEvery));
      error_code ec;
      co_await waker->timer.async_wait(net::redirect_error(use_awaitable, ec));
    }
  }
  g.channel->set_notify(nullptr);
  if (watching) {
    error_code ec;
    raw().cancel(ec);  // the readiness wait; nothing else is pending
  }
  if (!finished) {
    env_.ctx.engine.cancel(g.channel);  // the client is gone: free its blocks at the next step
    co_return false;
  }
  if (whole) co_return co_await write_reply(*whole, keep_alive && !half_closed, false);
  co_return ok && keep_alive && !half_closed;
}

// Something a live client ignores, to learn whether a client that sent FIN is still there: an SSE
// comment in a stream; before a whole answer, an interim "100 Continue", which every HTTP/1.1
// client must accept (RFC 9110 §15.2). HTTP/1.0 forbids 1xx, and TLS clients close with
// close_notify: there a FIN means gone (false).
template <typename Stream>
awaitable<bool> Connection<Stream>::probe(const GenerationReply& g, unsigned version) {
  if (kTls) co_return false;
  if (g.stream) co_return co_await write_stream_text(kSsePing, version >= 11);
  if (version < 11) co_return false;
  static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
  error_code ec;
  deadline_.arm(limits_.write_timeout_s);
  co_await net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1), net::redirect_error(use_awaitable, ec));
  deadline_.disarm();
  co_return !ec;
}

// HTTPS: the TLS handshake first, under the request deadline (a client that connects and says
// nothing is one that sends no request). When it fails the connection closes; a plain-HTTP request
// gets a plain 400 that says what to do.
template <typename Stream>
awaitable<bool> Connection<Stream>::handshake() {
  if constexpr (kTls) {
    error_code ec;
    deadline_.arm(limits_.request_timeout_s);
    co_await stream_.async_handshake(ssl::stream_base::server, net::redirect_error(use_awaitable, ec));
    deadline_.disarm();
    if (!ec) co_return true;
    LOG_DEBUG("TLS handshake failed: " << ec.message());
    if (ec.category() == net::error::get_ssl_category() && ERR_GET_REASON(ec.value()) == SSL_R_HTTP_REQUEST) {
      const std::string body = "This port serves HTTPS: use https:// to reach it.\n";
      const std::string answer = "HTTP/1.1 400 Bad Request\r\nServer: pagoda\r\nContent-Type: text/plain\r\n"
                                 "Connection: close\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n" + body;
      deadline_.arm(limits_.write_timeout_s);
      co_await net::async_write(raw(), net::buffer(answer), net::redirect_error(use_awaitable, ec));
      deadline_.disarm();
    }
    co_return false;
  }
  co_return true;
}

// The socket became readable (or is being polled) while a generation runs. Plain: see peer_state.
// TLS: the bytes waiting may be a close_notify (curl sends one before it closes), so they are read
// through the TLS layer, briefly: end of stream or an error is a client gone; a request (pipelined)
// stays in buffer_.
template <typename Stream>
awaitable<Peer> Connection<Stream>::check_peer() {
  const Peer peer = peer_state(raw());
  if constexpr (kTls) {
    if (peer != Peer::pipelined) co_return peer;
    constexpr size_t kMaxBuffered = 1 << 20;  // a pipelined request is kept, not a flood of them
    if (buffer_.size() > kMaxBuffered) co_return peer;
    error_code ec;
    deadline_.arm(0.25);  // only a record that does not come whole waits; its end comes with it
    const size_t n = co_await stream_.async_read_some(buffer_.prepare(16 << 10), net::redirect_error(use_awaitable, ec));
    deadline_.disarm();
    if (!ec) buffer_.commit(n);
    co_return ec && !deadline_.expired() ? Peer::gone : Peer::pipelined;
  }
  co_return peer;
}

// HTTPS: close_notify, so that the client knows that nothing was cut. One way: the client's own
// close_notify is not awaited (a client idle in a connection pool would hold the connection open).
template <typename Stream>
awaitable<void> Connection<Stream>::tls_close() {
  if constexpr (kTls) {
    if (tls_closed_) co_return;
    tls_closed_ = true;
    SSL_set_shutdown(stream_.native_handle(), SSL_RECEIVED_SHUTDOWN);
    error_code ec;
    deadline_.arm(2.0);
    co_await stream_.async_shutdown(net::redirect_error(use_awaitable, ec));
    deadline_.disarm();
  }
  co_return;
}

// After an error answered before the body was read: stop sending, drain what the client is still
// sending for a moment, so that its kernel does not reset the connection before it reads our answer.
template <typename Stream>
awaitable<void> Connection<Stream>::linger_close() {
  co_await tls_close();
  error_code ec;
  raw().shutdown(tcp::socket::shutdown_send, ec);
  deadline_.arm(2.0);
  char sink[16 << 10];
  for (size_t total = 0; total < (size_t{4} << 20);) {
    const size_t n = co_await raw().async_read_some(net::buffer(sink), net::redirect_error(use_awaitable, ec));
    if (ec) break;
    total += n;
  }
  deadline_.disarm();
}

// glibc keeps the freed memory of a large request in its arenas; give it back. One trim queued at a
// time: the call walks the heap.
template <typename Stream>
void Connection<Stream>::trim_memory(size_t request_bytes) {
  constexpr size_t kLarge = size_t{1} << 20;
  if (request_bytes < kLarge || env_.trim_queued.exchange(true)) return;
  net::post(env_.workers, [&queued = env_.trim_queued] {
    queued = false;
    malloc_trim(0);
  });
}

}  // namespace

awaitable<void> serve_connection(SessionEnv& env, tcp::socket socket) {
  if (env.tls) {
    Connection<ssl::stream<tcp::socket>> c(env, socket);
    co_await c.run();
  } else {
    Connection<tcp::socket> c(env, socket);
    co_await c.run();
  }
}

}  // namespace pagoda::server
