#pragma once
// SigpipeGuard: ignores SIGPIPE while a gloo backend is alive.
#include <csignal>

namespace idist::gloo_backend {

/// Gloo's TCP transport writes with writev(), which raises SIGPIPE when a peer has died; the default
/// action would kill the surviving rank instead of letting it report the failure (Python, and so
/// PyTorch, ignore SIGPIPE for this reason). The guard sets SIGPIPE to SIG_IGN when it is at its
/// default, and restores the default in restore() / its destructor. A handler installed by the
/// program is left alone.
class SigpipeGuard {
 public:
  SigpipeGuard();
  ~SigpipeGuard() { restore(); }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;
  /// Puts the default action back if this guard changed it. Idempotent.
  void restore() noexcept;

 private:
  bool changed_ = false;
};

}  // namespace idist::gloo_backend
