//go:build !amd64

package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// groupedFast returns no kernels: there is no assembly on this architecture.
func groupedFast(bool) map[gguf.TensorType]Kernel { return nil }

// quantizeLaneFast is quantizeLane.
func quantizeLaneFast(dst []byte, lane int, x []float32) { quantizeLane(dst, lane, x) }
