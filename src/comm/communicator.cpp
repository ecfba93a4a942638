#include "eagle/comm/communicator.hpp"

#include "comm/backend.hpp"

namespace eagle::comm {

namespace {

const detail::CommImpl& live(const std::shared_ptr<detail::CommImpl>& impl, const char* what) {
  if (!impl)
    throw InvalidArgument(std::string("Communicator::") + what +
                          ": the communicator is empty (make one with comm::cpu_group or "
                          "comm::nccl)");
  return *impl;
}

}  // namespace

int Communicator::rank() const {
  return live(impl_, "rank").rank();
}
int Communicator::size() const {
  return live(impl_, "size").size();
}
Device Communicator::device() const {
  return live(impl_, "device").device();
}
std::string Communicator::kind() const {
  return live(impl_, "kind").kind();
}
std::string Communicator::describe() const {
  const detail::CommImpl& c = live(impl_, "describe");
  return "rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size()) + " (" + c.kind() +
         " on " + c.device().str() + ")";
}

}  // namespace eagle::comm
