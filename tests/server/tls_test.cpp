// `pagoda serve --ssl-keyfile/--ssl-certfile` end to end: certificates made at test time with the
// openssl command line; curl (trusting only the test's certificate) and the official openai npm
// client (tests/server/tls_client.mjs, NODE_EXTRA_CA_CERTS) over HTTPS; plain HTTP on the HTTPS
// port; client certificates; a client that hangs up; certificate and key files that cannot be used.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server_harness.h"
#include "core/build_paths.h"

namespace pagoda::server::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A temporary directory with self-signed certificates (each its own CA) and their keys.
struct Certs {
  Certs() {
    std::string tmpl = (fs::temp_directory_path() / "pagoda-tls-XXXXXX").string();
    const char* d = mkdtemp(tmpl.data());
    if (!d) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir = d;
    make("server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    make("other", "/CN=other", "subjectAltName=DNS:other");
    make("client", "/CN=client", "extendedKeyUsage=clientAuth");
  }
  ~Certs() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  void make(const std::string& name, const std::string& subject, const std::string& ext) {
    const CommandResult r = run_command("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                                        "-days 2 -keyout " + key(name) + " -out " + cert(name) + " -subj '" +
                                        subject + "' -addext '" + ext + "' 2>&1");
    if (r.code != 0) ADD_FAILURE() << "openssl (Debian package openssl) failed: " << r.out;
  }
  std::string cert(const std::string& name) const { return dir + "/" + name + "-cert.pem"; }
  std::string key(const std::string& name) const { return dir + "/" + name + "-key.pem"; }
  std::string dir;
};

const std::string kCompletion = R"({"model": "tiny", "prompt": "hello", "max_tokens": 5, "ignore_eos": true})";
const std::string kStream =
    R"({"model": "tiny", "prompt": "hello", "max_tokens": 5, "ignore_eos": true, "stream": true})";

class Tls : public ::testing::Test {
 protected:
  bool start(const std::vector<std::string>& extra = {}, const std::string& curl_options = "") {
    std::vector<std::string> args = {"--served-model-name", "tiny", "--max-model-len", "2048", "--ssl-keyfile",
                                     certs_.key("server"), "--ssl-certfile", certs_.cert("server")};
    args.insert(args.end(), extra.begin(), extra.end());
    server_.scheme = "https";
    server_.curl_options = "--cacert " + certs_.cert("server") + curl_options;
    return server_.start(model_.path, args);
  }
  // `pagoda serve` that should refuse to start: its exit status and what it printed.
  CommandResult serve_fails(const std::string& flags) {
    return run_command(std::string("timeout 60 ") + PAGODA_BINARY + " serve " + model_.path +
                       " --host 127.0.0.1 --port 0 --threads 2 " + flags + " 2>&1");
  }
  Certs certs_;
  TestModelDir model_;
  ServerProcess server_;
};

TEST_F(Tls, CompletionsOverHttps) {
  ASSERT_TRUE(start()) << server_.log();
  HttpResult r = server_.request("POST", "/v1/completions", kCompletion);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "length") << r.body;
  EXPECT_EQ(r.json()["usage"]["completion_tokens"], 5) << r.body;

  r = server_.request("POST", "/v1/completions", kStream);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("data: {"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << r.body;

  // It is TLS with the test's certificate: a client that trusts only another one refuses it.
  const CommandResult untrusted = run_command("curl -s -m 20 -o /dev/null --cacert " + certs_.cert("other") + " " +
                                              server_.url("/health"));
  EXPECT_EQ(untrusted.code, 60) << "curl should fail certificate verification (60): " << untrusted.out;
  EXPECT_EQ(server_.stop(), 0) << server_.log();
}

TEST_F(Tls, PlainHttpOnTheHttpsPortIsRefusedAndServingGoesOn) {
  ASSERT_TRUE(start()) << server_.log();
  const std::string plain = "http://127.0.0.1:" + std::to_string(server_.port()) + "/v1/completions";
  for (int i = 0; i < 3; ++i) {
    const CommandResult r = run_command("curl -s -m 20 -w '\\n%{http_code}' -H 'Content-Type: application/json' "
                                        "-d '" + kCompletion + "' " + plain);
    // A plain 400 that says what to do, then the connection closes.
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out.substr(r.out.rfind('\n') + 1), "400") << r.out;
    EXPECT_NE(r.out.find("use https://"), std::string::npos) << r.out;
  }
  // Garbage that is neither HTTP nor TLS, and a client that connects and leaves mid-handshake.
  run_command("printf 'xxxxxxxxxxxxxxxxxxxxxxxx\\r\\n\\r\\n' | timeout 10 curl -s -m 5 telnet://127.0.0.1:" +
              std::to_string(server_.port()) + " >/dev/null 2>&1");
  run_command("printf '\\x16\\x03\\x01\\x02\\x00\\x01' | timeout 10 curl -s -m 2 telnet://127.0.0.1:" +
              std::to_string(server_.port()) + " >/dev/null 2>&1");
  const HttpResult r = server_.request("POST", "/v1/completions", kCompletion);
  EXPECT_EQ(r.status, 200) << r.body << "\n" << server_.log();
  EXPECT_EQ(server_.stop(), 0) << server_.log();
}

TEST_F(Tls, OpenAiClientOverHttps) {
  ASSERT_TRUE(start()) << server_.log();
  const CommandResult r =
      run_command("NODE_EXTRA_CA_CERTS=" + certs_.cert("server") + " node " +
                  source_path("tests/server/tls_client.mjs") + " " + std::to_string(server_.port()) + " tiny 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << server_.log();
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;
  EXPECT_EQ(server_.stop(), 0) << server_.log();
}

// The raw socket's readiness and MSG_PEEK still tell a client that hung up under TLS.
TEST_F(Tls, ClientThatHangsUpIsAborted) {
  ASSERT_TRUE(start()) << server_.log();
  // 32 x 1,900 tokens: seconds of work for the tiny model.
  const std::string body = R"({"model": "tiny", "prompt": "tell me", "n": 32, "max_tokens": 1900, "ignore_eos": true})";
  const CommandResult r = run_command("curl -s -m 0.3 --cacert " + certs_.cert("server") +
                                      " -H 'Content-Type: application/json' -d '" + body + "' " +
                                      server_.url("/v1/completions"));
  EXPECT_EQ(r.code, 28) << "the request should still be running when curl gives up: " << r.out.substr(0, 300);
  const auto t = Clock::now();
  while (Clock::now() - t < 3s && server_.metric("vllm:num_requests_running") > 0) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server_.metric("vllm:num_requests_running"), 0);
  EXPECT_LT(Clock::now() - t, 1s) << "aborting the abandoned request took too long";
  EXPECT_EQ(server_.request("POST", "/v1/completions", kCompletion).status, 200);
  EXPECT_EQ(server_.stop(), 0) << server_.log();
}

TEST_F(Tls, ClientCertificatesWhenRequired) {
  ASSERT_TRUE(start({"--ssl-ca-certs", certs_.cert("client"), "--ssl-cert-reqs", "2"},
                    " --cert " + certs_.cert("client") + " --key " + certs_.key("client")))
      << server_.log();
  EXPECT_EQ(server_.request("POST", "/v1/completions", kCompletion).status, 200);
  // No client certificate, or one from another CA: refused.
  const std::string curl = "curl -s -m 20 -o /dev/null -w '%{http_code}' --cacert " + certs_.cert("server");
  const CommandResult none = run_command(curl + " " + server_.url("/health"));
  EXPECT_NE(none.out, "200") << none.out;
  const CommandResult other = run_command(curl + " --cert " + certs_.cert("other") + " --key " +
                                          certs_.key("other") + " " + server_.url("/health"));
  EXPECT_NE(other.out, "200") << other.out;
  EXPECT_EQ(server_.request("GET", "/health").status, 200);
  EXPECT_EQ(server_.stop(), 0) << server_.log();
}

TEST_F(Tls, UnusableFilesStopServeNamingThem) {
  // A key that is not the certificate's.
  CommandResult r = serve_fails("--ssl-keyfile " + certs_.key("other") + " --ssl-certfile " + certs_.cert("server"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(certs_.key("other")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("match"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("serving"), std::string::npos) << r.out;

  // A key file that does not exist, a certificate file that is not a certificate.
  const std::string missing = certs_.dir + "/missing-key.pem";
  r = serve_fails("--ssl-keyfile " + missing + " --ssl-certfile " + certs_.cert("server"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--ssl-keyfile " + missing), std::string::npos) << r.out;
  r = serve_fails("--ssl-keyfile " + certs_.key("server") + " --ssl-certfile " + certs_.key("server"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--ssl-certfile " + certs_.key("server")), std::string::npos) << r.out;

  // A key without its certificate.
  r = serve_fails("--ssl-keyfile " + certs_.key("server"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--ssl-certfile"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pagoda::server::test
