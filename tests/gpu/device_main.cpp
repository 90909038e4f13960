// Main of the device tests: exit 77 (ctest: skipped) when no CUDA device can
// be used, so they are never reported as passed without having run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "gpu/gpu.h"

int main(int argc, char** argv) {
  if (!toktier::gpu::CudaCompiled() || !toktier::gpu::DevicePresent()) {
    std::printf("SKIPPED: no CUDA device (cuda_compiled=%d)\n", toktier::gpu::CudaCompiled() ? 1 : 0);
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
