// Package registered makes every generated family (gen/registry's table) known to the contract:
// its kernel list is lowered again from its graph for its fixture. It stands apart from
// gen/registry so that linking the families, as a server does, links no compiler.
package registered

import (
	"tfc/contracts"
	"tfc/gen/registry"
)

func init() {
	for _, f := range registry.Families {
		contracts.Register(f.Name, contracts.FromGraph(f.Name, f.Kernels, f.Graph, f.Fixture+"/config.json", f.PageSize))
	}
}
