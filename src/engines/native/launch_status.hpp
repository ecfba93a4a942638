// The outcome of the structured kernels' last launch on this thread: a plan's run() records it
// and returns false on an error; its explain() reads it back. Never throws.
#pragma once

namespace eagle::native {

// Records the status of a launch just issued (cudaGetLastError()); true when it succeeded.
bool launch_succeeded() noexcept;
// What the last failed launch on this thread said.
const char* structured_launch_error() noexcept;

}  // namespace eagle::native
