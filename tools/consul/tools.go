//go:build tools

// Package tools pins the MPL-2.0 Consul release (v1.13.9) that the test
// helpers build into a cache directory. It is a module of its own so that
// Consul's server dependencies never enter the topokit module's graph.
package tools

import _ "github.com/hashicorp/consul"
