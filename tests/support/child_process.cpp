#include "support/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

extern char** environ;

namespace flashjit::testing {
namespace {

constexpr unsigned kNobody = 65534;

// Forks with stdout and stderr of the child sent into two pipes, read as they fill (so that
// `output` keeps their order); `child` never returns.
ChildResult fork_and_capture(const std::function<void()>& child) {
  int out_fds[2], err_fds[2];
  if (::pipe(out_fds) != 0 || ::pipe(err_fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(out_fds[1], STDOUT_FILENO);
    ::dup2(err_fds[1], STDERR_FILENO);
    for (int fd : {out_fds[0], out_fds[1], err_fds[0], err_fds[1]}) ::close(fd);
    child();
    ::_exit(127);
  }
  ::close(out_fds[1]);
  ::close(err_fds[1]);
  ChildResult result;
  pollfd fds[2] = {{out_fds[0], POLLIN, 0}, {err_fds[0], POLLIN, 0}};
  std::string* streams[2] = {&result.out, &result.err};
  // What each stream has given past its last newline: `output` takes whole lines only, so a
  // read that ends mid-line (4 KB at a time) never puts the other stream's text inside a line.
  std::string partial[2];
  for (int open = 2; open > 0;) {
    if (::poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
        result.output += partial[i];  // the last line, without its newline
        partial[i].clear();
        continue;
      }
      streams[i]->append(buffer, static_cast<std::size_t>(n));
      partial[i].append(buffer, static_cast<std::size_t>(n));
      const std::size_t end = partial[i].rfind('\n');
      if (end == std::string::npos) continue;
      result.output.append(partial[i], 0, end + 1);
      partial[i].erase(0, end + 1);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "child threw: %s\n", error.what());
    return 1;
  }
}

}  // namespace

ChildResult run_in_child(const std::function<int()>& body, bool as_nobody) {
  return fork_and_capture([&] {
    if (as_nobody && ::geteuid() == 0) {
      if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(126);
    }
    int code = guarded(body);
    std::fflush(nullptr);
    ::_exit(code);
  });
}

std::vector<ChildResult> run_in_children(int count, const std::function<int(int)>& body) {
  // Every child blocks on the gate pipe until the parent closes it, so they start together.
  int gate[2];
  if (::pipe(gate) != 0) throw std::runtime_error("pipe failed");
  std::vector<pid_t> pids;
  std::vector<int> outputs;
  for (int i = 0; i < count; ++i) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(out[1], STDERR_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      ::close(gate[1]);
      char byte;
      (void)::read(gate[0], &byte, 1);  // returns 0 when the parent closes the gate
      int code = guarded([&] { return body(i); });
      std::fflush(nullptr);
      ::_exit(code);
    }
    ::close(out[1]);
    pids.push_back(pid);
    outputs.push_back(out[0]);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  std::vector<ChildResult> results(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    char buffer[4096];
    for (ssize_t n; (n = ::read(outputs[i], buffer, sizeof(buffer))) > 0;) {
      results[i].output.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(outputs[i]);
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    results[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return results;
}

ChildResult run_program(const std::vector<std::string>& argv,
                        const std::vector<std::string>& extra_env) {
  return fork_and_capture([&] {
    for (const std::string& entry : extra_env) ::putenv(const_cast<char*>(entry.c_str()));
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execve(args[0], args.data(), environ);
    std::perror("execve");
    ::_exit(127);
  });
}

}  // namespace flashjit::testing
