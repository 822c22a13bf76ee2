package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

//go:generate go run ./internal/asmgen

// fastTiles returns the assembly tiles of level l.
func fastTiles(l Level) map[gguf.TensorType]*tiler {
	switch l {
	case AVX2:
		return tilesAVX2()
	case AVX512:
		return tilesAVX512()
	}
	return nil
}
