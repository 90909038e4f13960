// The unit tests' main: doctest's, except that a run in which a case was
// skipped for missing optional data (SkipForMissingData) and none failed
// exits 77, which ctest reports as skipped instead of passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "test_support.h"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failed = context.run();
  if (context.shouldExit() || failed != 0) return failed;
  return toktier::test::SkippedForMissingData() ? 77 : 0;
}
