// The eagle command line.
#include <cstdio>
#include <string>
#include <vector>

#include "demo.hpp"
#include "eagle/eagle.hpp"

namespace {

void usage() {
  std::puts(
      "usage: eagle <command> [options]\n"
      "  demo      run the heat-equation demo eagerly and as one recorded graph, and time both\n"
      "            options: --device cpu|cuda[:N] (default: cuda:0 when a GPU is present)\n"
      "                     --size N (256) --steps N (50) --repeats N (20) --threads N (all)\n"
      "  devices   print the properties descriptor (JSON) of every device");
}

int devices() {
  std::printf("%s\n", eagle::DeviceProperties::query(eagle::Device::cpu()).to_json().c_str());
  for (int i = 0; i < eagle::cuda_device_count(); ++i)
    std::printf("%s\n", eagle::DeviceProperties::query(eagle::Device::cuda(i)).to_json().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  try {
    const std::string command = args[0];
    args.erase(args.begin());
    if (command == "demo") return eagle::tools::run_demo(args);
    if (command == "devices") return devices();
    std::fprintf(stderr, "eagle: unknown command '%s'\n", command.c_str());
    usage();
    return 2;
  } catch (const eagle::Error& e) {
    std::fprintf(stderr, "eagle: %s\n", e.what());
    return 1;
  }
}
