// DLPack import and export (versioned DLManagedTensorVersioned, DLPack 1.x ABI).
#pragma once

#include "eagle/core/array.hpp"
#include "eagle/core/dlpack_abi.h"

namespace eagle {

// Exports `array` as a DLPack tensor that shares its memory and keeps it alive. The consumer
// calls the tensor's deleter exactly once when done.
DLManagedTensorVersioned* to_dlpack(const Array& array);

// Imports a DLPack tensor without copying; the returned Array calls `tensor`'s deleter when its
// last view dies. Throws InvalidArgument (and leaves ownership with the caller) on a tensor eagle
// cannot represent: unsupported dtype, lanes != 1, an unsupported device type, or a major version
// other than 1.
Array from_dlpack(DLManagedTensorVersioned* tensor);

// A non-owning view of a DLTensor (no deleter runs): the caller keeps the memory alive while the
// view is used. Same checks as from_dlpack.
Array view_dlpack(const DLTensor& tensor);

}  // namespace eagle
