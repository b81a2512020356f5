// attn_check.h: what the attention drivers (attn.cpp, paged.cpp) share: the pass/fail count and
// the error of an output against its float64 reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "check.h"

// worst is the largest error of y against ref relative to the largest finite reference magnitude
// of each row's head of hd values; -1 when a NaN or infinity is not the reference's.
static double worst(int hd, const std::vector<float>& y, const std::vector<double>& ref) {
  double w = 0;
  for (size_t r = 0; r < ref.size() / hd; ++r) {
    double scale = 0;
    for (int t = 0; t < hd; ++t)
      if (std::isfinite(ref[r * hd + t])) scale = std::max(scale, std::fabs(ref[r * hd + t]));
    for (int t = 0; t < hd; ++t) {
      const double got = y[r * hd + t], want = ref[r * hd + t];
      if (!std::isfinite(got) || !std::isfinite(want)) {
        if (std::isnan(want) != std::isnan(got) || (std::isinf(want) && got != want)) return -1;
        continue;
      }
      w = std::max(w, std::fabs(got - want) / std::max(scale, 1e-30));
    }
  }
  return w;
}
