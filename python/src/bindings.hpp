// The pieces of eagle's Python extension (eagle._eagle), one per area of the C++ library.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/core/stream.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/plan/operands.hpp"

namespace eagle::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);     // Error and its subclasses, with their translator
void bind_core(nb::module_& m);       // Device, DType, DeviceProperties, Stream
void bind_array(nb::module_& m);      // Array, DLPack both ways, __cuda_array_interface__
void bind_kernels(nb::module_& m);    // Kernel, the standard and cell kernels, eager launch
void bind_recording(nb::module_& m);  // Value, Recorder, Branch, Recording introspection
void bind_graph(nb::module_& m);      // Graph: build, run, bind, introspection, traces
void bind_diff(nb::module_& m);       // reverse mode
void bind_op(nb::module_& m);         // the operation IR and planning
void bind_ragged(nb::module_& m);     // ragged helpers and capacity buckets
void bind_comm(nb::module_& m);       // communicators and collectives
void bind_data(nb::module_& m);       // documents, the packing loader, zipf lengths
void bind_bench(nb::module_& m);      // timing hooks of the host-cost benchmark

// An object as an eagle Array: an Array itself, anything with __dlpack__ (numpy, torch, cupy,
// ...) or __cuda_array_interface__, without copying. `stream` is the stream the Array is used on
// (its producer orders its pending work before that stream); nullptr: the legacy default stream.
Array to_array(nb::handle obj, const Stream* stream = nullptr);
// The unused DLPack capsule to_array would import for `obj` (torch's fast export, or __dlpack__
// with the stream handshake), or an invalid object for anything else (an eagle Array, a capsule,
// __cuda_array_interface__). Dropping the capsule returns the memory to its producer.
nb::object foreign_capsule(nb::handle obj, const Stream* stream);
// The operand a capsule describes, checked as an import checks it, the capsule left unused (keep
// it alive while the operand is used).
plan::Operand operand_of_capsule(nb::handle capsule);
// A tensor through its producer's DLPack C exchange API (DLPack 1.3: the type attribute
// __dlpack_c_exchange_api__, a capsule; torch >= 2.10 has one): C calls of tens of nanoseconds
// where __dlpack__ is a Python call of microseconds. Taken only where no stream handshake is
// needed: a CPU tensor, or a CUDA tensor used on the stream its producer issues on now (a
// borrowed eagle.Stream of it). Otherwise, or when the producer has no such API or its call fails,
// nullopt: the caller takes __dlpack__'s way, which also says what is wrong with a tensor.
// The operand borrows the tensor's memory and layout (keep the object alive while it is used);
// the Array owns the producer's managed tensor.
std::optional<plan::Operand> exchange_operand(nb::handle obj, const Stream* stream);
std::optional<Array> exchange_array(nb::handle obj, const Stream* stream);
// Within its scope, the imports of a producer's CUDA tensors ask the producer for its current
// stream once per device instead of once per tensor: for a call importing several operands,
// during which no Python code runs that could change it.
class StreamMemo {
 public:
  StreamMemo();
  ~StreamMemo();
  StreamMemo(const StreamMemo&) = delete;
  StreamMemo& operator=(const StreamMemo&) = delete;

  // `producer`'s current stream on device `ordinal`: the innermost memo's answer when it holds
  // one for them, else `ask()` (kept in that memo, if there is one).
  template <typename Ask>
  static uintptr_t current_stream(const void* producer, int ordinal, Ask&& ask) {
    StreamMemo* m = innermost();
    if (m != nullptr && m->producer_ == producer && m->ordinal_ == ordinal) return m->stream_;
    const uintptr_t stream = ask();
    if (m != nullptr) {
      m->producer_ = producer;
      m->ordinal_ = ordinal;
      m->stream_ = stream;
    }
    return stream;
  }

 private:
  static StreamMemo* innermost();

  const void* producer_ = nullptr;  // whose stream was asked, null: none yet
  int ordinal_ = -1;                // on which device
  uintptr_t stream_ = 0;            // its answer
  StreamMemo* outer_;
};
// Whether `obj` can become an Array without copying.
bool is_array_like(nb::handle obj);

// The Stream and thread team eager calls use on `device` (one each per device, made on first
// use).
const Stream& eager_stream(Device device);

// A kernel call's number: a Python bool or int as an integer scalar, a float as a real one;
// nullopt for anything else.
std::optional<Scalar> to_scalar(nb::handle obj);

// A shape from any Python sequence of ints.
Shape to_shape(nb::handle seq);
nb::tuple shape_tuple(const Shape& shape);

}  // namespace eagle::python
