// The eagle command line. Exit codes: 0 success, 1 a failure while running, 2 a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "demo.hpp"
#include "eagle/eagle.hpp"
#include "eagle/engines/cublaslt.hpp"
#include "eagle/engines/cudnn.hpp"
#include "ops.hpp"
#include "pack.hpp"
#include "train/train_command.hpp"

namespace {

void devices_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: eagle devices\n"
               "  prints the properties descriptor (JSON) of the CPU and of every CUDA device,\n"
               "  then whether cuDNN and cuBLASLt were found (their engines need them)\n");
}

int devices(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "eagle devices: unexpected argument '%s'\n", args[0].c_str());
    devices_usage(stderr);
    return 2;
  }
  std::printf("%s\n", eagle::DeviceProperties::query(eagle::Device::cpu()).to_json().c_str());
  for (int i = 0; i < eagle::cuda_device_count(); ++i)
    std::printf("%s\n", eagle::DeviceProperties::query(eagle::Device::cuda(i)).to_json().c_str());
  // The vendor libraries eagle opens at run time: where from, or why their engines are absent.
  std::printf("cuDNN: %s\n", eagle::engines::cudnn_backend_status().c_str());
  std::printf("cuBLASLt: %s\n", eagle::engines::cublaslt_status().c_str());
  std::printf("CUPTI (GPU traces): %s\n", eagle::cupti_status().c_str());
  return 0;
}

struct Command {
  const char* name;
  const char* summary;
  void (*usage)(std::FILE*);
  int (*run)(const std::vector<std::string>&);
};

const Command kCommands[] = {
    {"demo", "run the heat-equation demo eagerly and as one recorded graph, and time both",
     &eagle::tools::demo_usage, &eagle::tools::run_demo},
    {"devices", "print the properties descriptor (JSON) of every device", &devices_usage, &devices},
    {"ops", "list the operations of the op tables, or describe one (ports, attributes, shapes)",
     &eagle::tools::ops_usage, &eagle::tools::run_ops},
    {"pack", "how sequences pack into token budgets: fill, padding, M; T, N and buckets to use",
     &eagle::tools::pack_usage, &eagle::tools::run_pack},
    {"train", "train a small model on packed documents: forward, reverse, AdamW as one graph",
     &eagle::tools::train_usage, &eagle::tools::run_train},
};

void usage(std::FILE* to) {
  std::fprintf(to, "usage: eagle <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(to, "  %-8s  %s\n", c.name, c.summary);
  std::fprintf(to, "\n`eagle <command> --help` describes a command's options.\n");
}

bool is_help(const std::string& arg) {
  return arg == "-h" || arg == "--help";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    usage(stderr);
    return 2;
  }
  if (is_help(args[0])) {
    usage(stdout);
    return 0;
  }
  const std::string name = args[0];
  args.erase(args.begin());
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    for (const std::string& a : args) {
      if (is_help(a)) {
        c.usage(stdout);
        return 0;
      }
    }
    try {
      return c.run(args);
    } catch (const eagle::Error& e) {
      std::fprintf(stderr, "eagle %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "eagle: unknown %s '%s'\n", name[0] == '-' ? "option" : "command",
               name.c_str());
  usage(stderr);
  return 2;
}
