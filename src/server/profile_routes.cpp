// POST /start_profile and /stop_profile, as vLLM serves them when its profiler is configured (what
// `vllm bench serve --profile` calls around its run): here they restart and report the step profiler
// of `serve --profile-steps N` (engine/step_profiler.h) on every data-parallel replica. The report
// is plain text, the tables docs/performance.md describes; without the flag both are 404.
#include <string>

#include "core/log.h"
#include "server/api_error.h"
#include "server/routes.h"

namespace pagoda::server {
namespace {

// Every replica's profiler, or 404 naming the flag when the server was started without it.
template <typename Fn>
void each_profiler(ServerContext& ctx, Fn fn) {
  bool any = false;
  for (size_t r = 0; r < ctx.engine.size(); ++r)
    if (StepProfiler* p = ctx.engine.replica(r).step_profiler()) {
      any = true;
      fn(r, *p);
    }
  if (!any) throw not_found("the step profiler is off: start the server with --profile-steps N (every N-th step timed)");
}

}  // namespace

HttpReply handle_start_profile(ServerContext& ctx, const HttpRequest&) {
  each_profiler(ctx, [](size_t, StepProfiler& p) { p.restart(); });
  LOG_INFO("step profiler restarted (POST /start_profile)");
  return text_reply("", "text/plain");
}

HttpReply handle_stop_profile(ServerContext& ctx, const HttpRequest&) {
  std::string text;
  each_profiler(ctx, [&](size_t r, StepProfiler& p) {
    text += (ctx.engine.size() > 1 ? "engine " + std::to_string(r) + " " : std::string()) + p.report();
  });
  LOG_INFO("POST /stop_profile:\n" << text);
  return text_reply(text, "text/plain; charset=utf-8");
}

}  // namespace pagoda::server
