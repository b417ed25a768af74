// A PyTorch (or any) coprocess driven one request/answer line at a time, so a benchmark can
// alternate our implementation and the baseline in one run. Exits the benchmark if the coprocess
// dies. Benchmarks only (no Status, exits on error).
#ifndef MOBIUS_BENCH_COMMON_TORCH_PROCESS_H_
#define MOBIUS_BENCH_COMMON_TORCH_PROCESS_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mobius::bench {

class TorchProcess {
 public:
  explicit TorchProcess(const std::string& command) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) std::exit(1);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
  }
  ~TorchProcess() {
    std::fputs("quit\n", to_);
    std::fclose(to_);
    std::fclose(from_);
    waitpid(pid_, nullptr, 0);
  }
  std::string Ask(const std::string& request) {
    std::fputs((request + "\n").c_str(), to_);
    std::fflush(to_);
    char buf[256];
    if (std::fgets(buf, sizeof(buf), from_) == nullptr) {
      std::fprintf(stderr, "PyTorch coprocess died (request: %s)\n", request.c_str());
      std::exit(1);
    }
    std::string answer = buf;
    while (!answer.empty() && answer.back() == '\n') answer.pop_back();
    return answer;
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_COMMON_TORCH_PROCESS_H_
