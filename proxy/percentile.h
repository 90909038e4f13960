// Percentiles for the benchmarks (`toktier bench repair`, the load generator):
// nearest rank on the sorted samples, index round(q * (n - 1)).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace toktier::cli {

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace toktier::cli
