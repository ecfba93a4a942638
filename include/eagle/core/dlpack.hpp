// DLPack import and export (versioned DLManagedTensorVersioned, DLPack 1.x ABI).
#pragma once

#include <span>

#include "eagle/core/array.hpp"
#include "eagle/core/dlpack_abi.h"

namespace eagle {

// Exports `array` as a DLPack tensor that shares its memory and keeps it alive. The consumer
// calls the tensor's deleter exactly once when done. A read-only array is exported with
// DLPACK_FLAG_BITMASK_READ_ONLY set. Throws InvalidArgument for an undefined array.
DLManagedTensorVersioned* to_dlpack(const Array& array);

// Imports a DLPack tensor without copying; the returned Array calls `tensor`'s deleter when its
// last view dies. A tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY becomes a read-only Array.
// Throws InvalidArgument on a tensor eagle cannot represent: a null tensor, a major version other
// than 1, unsupported dtype, lanes != 1, an unsupported device type, a negative ndim or dim, a
// null shape, null data for a non-empty tensor, or a shape, strides or byte_offset whose counts or
// byte offsets do not fit in int64 or the address space. On every failure the deleter has not run
// and ownership stays with the caller.
Array from_dlpack(DLManagedTensorVersioned* tensor);

// A non-owning view of a DLTensor (no deleter runs): the caller keeps the memory alive while the
// view is used. Same checks as from_dlpack. (A bare DLTensor has no flags: the view is writable.)
Array view_dlpack(const DLTensor& tensor);

// A DLTensor's fields as eagle reads them, each checked as from_dlpack checks it
// (InvalidArgument naming `who`): its dtype, its device, its dims (the tensor's own array), and
// its first element's address (data + byte_offset; data may be null only when numel is 0).
DType dlpack_dtype(const DLDataType& dtype, const char* who);
Device dlpack_device(const DLDevice& device, const char* who);
std::span<const int64_t> dlpack_dims(const DLTensor& tensor, const char* who);
char* dlpack_start(const DLTensor& tensor, int64_t numel, const char* who);

}  // namespace eagle
