#include "gloo/sigpipe_guard.hpp"

namespace idist::gloo_backend {

SigpipeGuard::SigpipeGuard() {
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) != 0) return;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
    changed_ = true;
  }
}

void SigpipeGuard::restore() noexcept {
  if (!changed_) return;
  changed_ = false;
  std::signal(SIGPIPE, SIG_DFL);
}

}  // namespace idist::gloo_backend
