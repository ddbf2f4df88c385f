// `serve --ssl-keyfile/--ssl-certfile` (as vllm serve / uvicorn): the server's TLS context, made
// once at startup so that an unreadable or mismatched file stops `serve` before the model loads.
#pragma once

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace pagoda::server {

struct TlsOptions {
  std::string keyfile;   // PEM private key; "" = in certfile
  std::string certfile;  // PEM certificate chain (the server's first); "" = plain HTTP
  std::string ca_certs;  // PEM CAs that client certificates are checked against
  int cert_reqs = 0;     // Python's ssl.CERT_*: 0 none, 1 optional, 2 required (a client certificate)
  bool enabled() const { return !certfile.empty(); }
};

// Throws pagoda::Error naming the flag and file that cannot be used, and why.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const TlsOptions& options);

}  // namespace pagoda::server
