// tfc_kernels.h: the device templates that generated kernels specialise.
//
// Generated kernels (kernels/<family>.hip) are thin: they bake in a family's constants, compose
// epilogues op by op, and call these templates for the parts that are the same everywhere (GEMM
// tiles, block reductions, attention). Every reduction runs in a fixed order that depends only
// on the row being computed, never on how many rows a launch has. Reductions go through LDS, so
// the code is the same for wave32 and wave64.
//
// MUT selects a planted control (a deliberately wrong kernel for the contract's gates) and is
// TFC_MUT_NONE in every kernel that serves.
#pragma once
#include "tfc_hip.h"

// The templates, by concern; included in this order (the attention over spans declares the
// tensor-core attention that tfc_mma_attention.h defines).
#include "tfc_mutations.h"
#include "tfc_math.h"
#include "tfc_reduce.h"
#include "tfc_gemm.h"
#include "tfc_attention.h"
#include "tfc_mma_gemm.h"
#include "tfc_amd_gemm.h"
#include "tfc_mma_attention.h"
