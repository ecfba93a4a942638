// The whole public API of eagle.
#pragma once

#include "eagle/core/array.hpp"
#include "eagle/core/device.hpp"
#include "eagle/core/dlpack.hpp"
#include "eagle/core/dtype.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "eagle/exec/graph.hpp"
#include "eagle/graph/recording.hpp"
#include "eagle/kernel/cells.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/thread_team.hpp"
