package cli

// The bundled backends register their factories ("memory", ...) when
// imported.
import (
	_ "github.com/topokit/topokit/topo/memorytopo"
)
