// Runs a shell command for a test and captures its exit code and output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace pagoda::testing {

struct CommandResult {
  int code = -1;
  std::string out;  // what the command printed (stderr too when the command redirects it)
};

inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace pagoda::testing
