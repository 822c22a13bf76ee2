package loader

import "context"

// LoadProgress is told as a model's weights are read in while its engine
// opens: done of total bytes of the model named model. total may grow
// (a file read in twice, see gguf.OpenOptions.Progress); done only grows.
// It is called on the goroutine opening the engine.
type LoadProgress func(model string, done, total int64)

// loadProgressKey is the context key of a LoadProgress.
type loadProgressKey struct{}

// WithLoadProgress returns ctx carrying f: the engines that Kinds open
// with the returned context, or one derived from it, tell f how their
// weights are read in (kinds that read weights: cpu, for GGUF files on
// disk).
func WithLoadProgress(ctx context.Context, f LoadProgress) context.Context {
	return context.WithValue(ctx, loadProgressKey{}, f)
}

// loadProgress returns the LoadProgress of ctx bound to the model named
// model, nil if ctx carries none.
func loadProgress(ctx context.Context, model string) func(done, total int64) {
	f, _ := ctx.Value(loadProgressKey{}).(LoadProgress)
	if f == nil {
		return nil
	}
	return func(done, total int64) { f(model, done, total) }
}
