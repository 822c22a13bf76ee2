//go:build !amd64 && !arm64

package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// fastTiles returns no tiles: only the reference kernels run here.
func fastTiles(Level) map[gguf.TensorType]*tiler { return nil }
