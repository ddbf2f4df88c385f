#include "server/tls_context.h"

#include <fstream>

#include <boost/asio/ssl/context.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/error.h"

namespace pagoda::server {

namespace ssl = boost::asio::ssl;

namespace {

// Reading the file ourselves first gives "cannot read" a clear cause (missing, permissions) that
// OpenSSL's own message ("system lib") does not.
void check_readable(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good() && in.peek() != std::char_traits<char>::eof(),
        flag + " " + path + ": cannot read the file (missing, empty or not readable)");
}

std::string reason(const boost::system::error_code& ec) {
  std::string r = ec.message();
  return r.empty() ? "unknown OpenSSL error" : r;
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const TlsOptions& o) {
  check(!o.certfile.empty(),
        "--ssl-keyfile, --ssl-ca-certs and --ssl-cert-reqs need --ssl-certfile (the server's certificate chain)");
  check(o.cert_reqs >= 0 && o.cert_reqs <= 2,
        "--ssl-cert-reqs must be 0 (no client certificate), 1 (optional) or 2 (required)");
  check(o.cert_reqs == 0 || !o.ca_certs.empty(), "--ssl-cert-reqs 1 or 2 needs --ssl-ca-certs (the CAs to check "
                                                 "client certificates against)");
  const std::string key_flag = o.keyfile.empty() ? "--ssl-certfile" : "--ssl-keyfile";
  const std::string& key_path = o.keyfile.empty() ? o.certfile : o.keyfile;
  check_readable("--ssl-certfile", o.certfile);
  check_readable(key_flag, key_path);
  if (!o.ca_certs.empty()) check_readable("--ssl-ca-certs", o.ca_certs);

  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  // TLS 1.2 and 1.3 only, as Python's ssl (and so vLLM) defaults to.
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  // An encrypted key would make OpenSSL prompt on the terminal: fail instead.
  ctx->set_password_callback([](size_t, ssl::context::password_purpose) { return std::string(); });
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(o.certfile, ec);
  check(!ec, "--ssl-certfile " + o.certfile + ": not a PEM certificate chain (" + reason(ec) + ")");
  ctx->use_private_key_file(key_path, ssl::context::pem, ec);
  check(!ec, key_flag + " " + key_path + ": not a usable PEM private key for the certificate in " + o.certfile +
                 " (" + reason(ec) + "; an encrypted key is not supported, and the key must match the certificate)");
  check(SSL_CTX_check_private_key(ctx->native_handle()) == 1,
        key_flag + " " + key_path + ": the private key does not match the certificate in " + o.certfile);
  if (!o.ca_certs.empty()) {
    ctx->load_verify_file(o.ca_certs, ec);
    check(!ec, "--ssl-ca-certs " + o.ca_certs + ": not a PEM file of CA certificates (" + reason(ec) + ")");
  }
  if (o.cert_reqs > 0) {
    ssl::verify_mode mode = ssl::verify_peer;
    if (o.cert_reqs == 2) mode |= ssl::verify_fail_if_no_peer_cert;
    ctx->set_verify_mode(mode);
    // Session resumption with client certificates needs a session id context.
    static constexpr unsigned char kId[] = "pagoda";
    SSL_CTX_set_session_id_context(ctx->native_handle(), kId, sizeof kId - 1);
  }
  ERR_clear_error();
  return ctx;
}

}  // namespace pagoda::server
