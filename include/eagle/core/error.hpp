// Typed errors. A decline (NotSupported) is an answer; everything else is a bug or bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace eagle {

// Base of every error eagle throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Bad input from the caller: the message names the argument and the rule it broke.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& what) : Error(what) {}
};

// A typed decline: this implementation does not serve this input. Not a bug.
class NotSupported : public Error {
 public:
  explicit NotSupported(const std::string& what) : Error(what) {}
};

// A recording that cannot be turned into a correct graph (a race, a bad buffer).
class RecordError : public Error {
 public:
  explicit RecordError(const std::string& what) : Error(what) {}
};

// A failure reported by the CUDA runtime or driver.
class CudaError : public Error {
 public:
  explicit CudaError(const std::string& what) : Error(what) {}
};

}  // namespace eagle
