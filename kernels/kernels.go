// Package kernels carries the HIP sources into the binary: the portability header tfc_hip.h, the
// device templates tfc_kernels.h, and each family's generated <family>.hip with the schedule its
// kernels are launched by (<family>.schedule.json), so that a GPU backend
// can build code objects (or cubins) at run time from what it was compiled with.
package kernels

import "embed"

// Sources holds every *.h, *.hip and *.schedule.json file of this folder, by base name.
//
//go:embed *.h *.hip *.schedule.json
var Sources embed.FS
