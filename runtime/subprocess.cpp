#include "subprocess.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "file_io.hpp"

extern char** environ;

namespace flashjit::detail {
namespace {

// Closes a pipe's ends on every way out of run_process.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  ~Pipe() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
};

std::string read_until_eof(int fd) {
  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return output;
    output.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult result;
  Pipe pipe;
  int ends[2];
  // Close-on-exec, so that a program another thread starts meanwhile does not hold the write
  // end open (the read below would then wait for that program too).
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    result.output = "cannot create a pipe: " + errno_text(errno);
    return result;
  }
  pipe.read_end = ends[0];
  pipe.write_end = ends[1];
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe.write_end, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe.write_end, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    result.output = "cannot run " + argv[0] + ": " + errno_text(error);
    return result;
  }
  ::close(pipe.write_end);
  pipe.write_end = -1;
  result.output = read_until_eof(pipe.read_end);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (WIFSIGNALED(status))
    result.output += "\n(killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  return result;
}

}  // namespace flashjit::detail
