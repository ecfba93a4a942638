// Scoped environment variables for tests of behaviour an environment variable switches.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace eagle::test {

// Unsets an environment variable for a scope (set() / unset() change it), then restores it.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) saved_ = v;
    unsetenv(name);
  }
  ~EnvGuard() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;
  void set(const char* value) { setenv(name_, value, 1); }
  void unset() { unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

}  // namespace eagle::test
