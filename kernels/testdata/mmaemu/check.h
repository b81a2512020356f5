// check.h: the pass/fail count every driver prints as "N passed, N failed".
#pragma once
#include <cstdio>

static int passed, failed;
static void check(bool ok, const char* what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    std::printf("FAIL %s\n", what);
  }
  std::fflush(stdout);
}
