package main

// The generated families this binary serves; each registers itself with runtime/model.
import (
	_ "tfc/gen/dotsocr"
	_ "tfc/gen/qwen2vl"
)
