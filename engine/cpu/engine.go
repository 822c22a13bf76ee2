// Package cpu is a pure-Go transformer engine for the GGUF architectures
// llama (also llama2.c checkpoints; Llama 3.x rope scaling, sliding windows
// where the file declares one), qwen2 (q/k/v biases), qwen3 (q/k RMSNorm),
// gemma2 and gemma3 (scaled embeddings, post-attention and post-FFN norms,
// GELU gates, soft-capping, sliding-window layers interleaved with global
// ones) and phi3 (fused QKV and gate-up, longrope scaling), with
// grouped-query attention, rotary embeddings in each architecture's GGUF
// layout, F32/F16/BF16, legacy and K-quant weights, a paged per-sequence
// KV cache with truncate, release and a memory budget, and one batched step
// over many sequences mixing extends and decodes in which every weight
// matrix is read once for the whole batch. Kernels run on a fixed worker
// pool owned by the engine and stopped by Close; a step in steady state
// allocates nothing.
package cpu

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// Options configure an Engine.
type Options struct {
	// Threads is the number of kernel threads including the caller's;
	// 0 means runtime.GOMAXPROCS(0).
	Threads int
	// KVBudgetBytes bounds the KV cache memory; 0 means 1 GiB.
	KVBudgetBytes int64
	// ContextLength caps the sequence length below the model's; 0 keeps it.
	ContextLength int
	// Kernels names one kernel level ("generic", "avx2", "avx512",
	// "avx512ng": AVX-512 without gathers, "neon", "neondot") for every
	// class of operation; a level the CPU lacks is an error. Empty
	// means a plan: each level the CPU runs is timed on the model's own
	// shapes and types for each class (one-column decode, small batches,
	// prompts, attention) and the fastest is taken per class, among levels
	// that give the same bits for a weight type (so that a sequence's
	// results do not depend on its batch; see kernels.Decide). The plan is
	// cached (KernelCacheDir) per CPU, kernel build and model shape, so
	// later starts measure nothing and engines of one model run the same
	// kernels whatever their thread count. KernelReport tells what was
	// chosen.
	Kernels string
	// KernelCacheDir is the directory of the kernel plan cache: "" means
	// os.UserCacheDir()/tokenrouter, "off" no cache.
	KernelCacheDir string
	// RemeasureKernels measures the kernel plan even if the cache has one
	// (and replaces it).
	RemeasureKernels bool
	// Logger receives the engine's start-up lines (the kernel plan); nil
	// means slog.Default().
	Logger *slog.Logger
	// NoPrefixCache turns prefix caching off: by default, full KV blocks
	// are shared between sequences that begin with the same tokens (see
	// PrefixCacheStats).
	NoPrefixCache bool
	// CPUs, when set, pins the kernel threads (Linux only; elsewhere it is
	// an error): worker w's OS thread to CPUs[w mod len(CPUs)], the thread
	// calling Step to CPUs[0] for the duration of the step (its previous
	// CPU set is restored after). Threads then defaults to len(CPUs). A
	// deployment gives each model's engine its own cores this way.
	CPUs []int
	// Arena, when set, is where the KV cache takes its memory and where
	// Close returns it, so that engines opened one after another reuse
	// warm memory (see Arena).
	Arena *Arena
	// KVReserveBytes is KV cache memory written once while the engine
	// opens (at most the budget), so that the cache does not fault in new
	// memory as it grows in the first minutes of serving (see Arena). With
	// Arena set, the arena is topped up to hold at least this much; else
	// the engine reserves it in an arena of its own. 0: none.
	KVReserveBytes int64
	// Tokenizer names the model's tokenizer file (any file tokenizer.Open
	// reads), as its text side uses it: Info.VocabHash is the hash of its
	// tokens. It is read only for that. Empty means the model file's own
	// vocabulary (a GGUF file's tokenizer.ggml.tokens); a llama2.c
	// checkpoint carries none, and its Info.VocabHash is then "".
	Tokenizer string
	// Vocab, when set, is the model's vocabulary already read (its text
	// side's token texts, in id order): Info.VocabHash is its hash, and
	// Tokenizer is not read.
	Vocab []string
	// LoadProgress, if set, is told as a GGUF file's weights are read in
	// by OpenContext: done of total bytes (gguf.OpenOptions.Progress).
	LoadProgress func(done, total int64)
}

// DefaultKVBudget is the KV cache budget when Options.KVBudgetBytes is 0.
const DefaultKVBudget = 1 << 30

// parallelMACs is the smallest matmul (in multiply-adds) split over threads.
const parallelMACs = 1 << 17

// partsPerThread is the number of parts per thread a pooled multiplication
// is split into (by whole row tiles). Each thread streams through its own
// contiguous share and steals parts of the others' when done early (see
// pool), so a thread the system runs late holds up at most one part, and
// the threads finish within about one part of each other. 16 parts per
// thread measured as fast as 8 on the 0.5B Q8_0 file but 11% slower on its
// Q4_K_M file (each part is a kernel call of its own).
const partsPerThread = 8

// partBytes caps the weight bytes of one part of a large multiplication:
// it gets a part per partBytes when that is more than partsPerThread a
// thread. The classifier of the 0.5B shape (144 MB in Q8_0) in 16 parts
// of 9 MB decoded 9-14% slower at 2 threads than in parts of 1 MiB
// (256 KiB to 4 MiB measured alike; paired runs).
const partBytes = 1 << 20

// seqSplitMACs is the largest per-token weight work (multiply-adds over all
// weight matrices) of a model whose multi-sequence batches run as parts of
// whole sequences, each on one worker: its weights (a few MiB at most) stay
// in cache, so every worker can read all of them, and a step needs no
// barrier between kernels.
const seqSplitMACs = 1 << 21

// Engine runs llama-family models on the CPU. It implements engine.Engine.
type Engine struct {
	cfg  *config
	w    *weights
	info engine.Info
	pool *pool
	kv   *kvPool

	ropes  [][]float64 // per rotary table, the angular frequency of each pair
	mscale []float64   // per rotary table, the factor of cos and sin
	scale  float32     // 1/sqrt(headDim)

	seqs    map[engine.SeqID]*sequence
	spare   []*sequence
	batch   []*sequence // per input of the current step
	scratch []workerScratch

	// per-step buffers, grown on demand and reused
	rowSeq            []*sequence
	rowPos            []int
	x, xb, q, k, v    []float32
	att, hb, hb2, xo  []float32
	cosSin            []float64
	outRows           []int
	hn, logits, probs []float32
	tokens            []int32
	order             []int32
	partRow, partOut  []int          // sequence-split parts of the current step
	skip              []int          // per input: positions found in the prefix cache
	view              []engine.Input // the inputs without them
	mm                matmulTask
	set               *kernels.Set // the highest level the plan uses (activation kernels)
	plan              kernelPlan
	log               *slog.Logger
	scores            kernels.ScoresFunc
	values            kernels.ValuesFunc
	glu               kernels.SwiGLUFunc // the FFN's gated activation
	expShift          kernels.ExpShiftFunc
	at                attnTask
	qt                qkvTask
	sp                seqTask
	tokenMACs         int // weight multiply-adds per token
	closed            bool
	enc               *encoder // pooled embeddings beside the steps (embeddings.go)
}

type workerScratch struct {
	act    [kernels.ActQ8G + 1][]byte // activations quantised per Act form
	narrow []byte                     // a few rows' ActQ8G activations narrowed (kernels.NarrowQ8G)
	mm     matmulTask                 // the worker's own multiplications (sequence-split steps)
	prep   prepTask                   // the worker's input preparation
	scores []float32                  // attention scores
}

var _ engine.Engine = (*Engine)(nil)

// Open loads a model file (GGUF, or a llama2.c checkpoint) into a new engine.
func Open(path string, opts Options) (*Engine, error) {
	return OpenContext(context.Background(), path, opts)
}

// OpenContext is Open, with ctx bounding the KV reserve
// (Options.KVReserveBytes).
func OpenContext(ctx context.Context, path string, opts Options) (*Engine, error) {
	c, w, err := loadFile(path, opts.LoadProgress)
	if err != nil {
		return nil, err
	}
	return openLoaded(ctx, path, c, w, opts)
}

// OpenBytes is OpenContext for a model file held in memory (GGUF, or a
// llama2.c checkpoint); name stands for its path (a checkpoint's model
// name, errors). A GGUF file is parsed in place: its weights stay in data,
// which must not change while the engine lives (read-only memory will do).
// A checkpoint is decoded once into weights of the engine's own.
func OpenBytes(ctx context.Context, name string, data []byte, opts Options) (*Engine, error) {
	c, w, err := loadBytes(name, data)
	if err != nil {
		return nil, err
	}
	return openLoaded(ctx, name, c, w, opts)
}

// openLoaded builds the engine of a model read from path.
func openLoaded(ctx context.Context, path string, c *config, w *weights, opts Options) (*Engine, error) {
	if c.name == "llama2.c" {
		c.name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	err := c.readTokenizer(opts)
	var e *Engine
	if err == nil {
		e, err = newEngine(ctx, c, w, opts)
	}
	if err != nil && w.file != nil {
		_ = w.file.Close()
	}
	return e, err
}

// readTokenizer sets c.vocabHash from Options.Vocab, or else the
// Options.Tokenizer file, if any.
func (c *config) readTokenizer(opts Options) error {
	if opts.Vocab != nil {
		c.vocabHash = engine.VocabHash(opts.Vocab)
		return nil
	}
	path := opts.Tokenizer
	if path == "" {
		return nil
	}
	t, err := tokenizer.Open(path, c.vocab)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	tokens := make([]string, t.VocabSize())
	for i := range tokens {
		tokens[i] = t.Token(int32(i))
	}
	c.vocabHash = engine.VocabHash(tokens)
	return nil
}

// NewFromGGUF builds an engine from a parsed GGUF file.
func NewFromGGUF(f *gguf.File, opts Options) (*Engine, error) {
	c, w, err := fromGGUF(f)
	if err != nil {
		return nil, err
	}
	if err := c.readTokenizer(opts); err != nil {
		return nil, err
	}
	return newEngine(context.Background(), c, w, opts)
}

func newEngine(ctx context.Context, c *config, w *weights, opts Options) (*Engine, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if opts.ContextLength > 0 && opts.ContextLength < c.ctx {
		c.ctx = opts.ContextLength
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
		if len(opts.CPUs) > 0 {
			threads = len(opts.CPUs)
		}
	}
	top, forced, err := kernelLevel(opts.Kernels)
	if err != nil {
		return nil, err
	}
	sets := kernelSets(top, forced)
	for _, m := range w.matrices() {
		if _, ok := sets[top].For(m.typ); !ok {
			return nil, fmt.Errorf("cpu: no kernel for weight type %s: %w", m.typ, gguf.ErrUnsupported)
		}
	}
	budget := opts.KVBudgetBytes
	if budget <= 0 {
		budget = DefaultKVBudget
	}
	e := &Engine{
		cfg: c, w: w, log: logger(opts.Logger),
		info: engine.Info{
			Name: c.name, Arch: c.arch, VocabSize: c.vocab, HiddenSize: c.dim,
			ContextLength: c.ctx, BOS: c.bos, EOS: c.eos, VocabHash: c.vocabHash,
		},
		kv:    newKVPool(c.layers, c.kvDim(), budget, !opts.NoPrefixCache, opts.Arena),
		seqs:  make(map[engine.SeqID]*sequence),
		scale: float32(1 / math.Sqrt(float64(c.headDim))),
		enc:   newEncoder(),
	}
	if e.kv.maxBlocks < 1 {
		return nil, fmt.Errorf("cpu: KV budget of %d bytes holds less than one block of %d tokens: %w", budget, blockTokens, engine.ErrOutOfMemory)
	}
	if opts.KVReserveBytes < 0 {
		return nil, fmt.Errorf("cpu: KV reserve of %d bytes: must not be negative", opts.KVReserveBytes)
	}
	if opts.KVReserveBytes > 0 {
		if e.kv.arena == nil {
			e.kv.arena = NewArena()
		}
		if err := e.kv.arena.reserveTo(ctx, min(opts.KVReserveBytes, budget)); err != nil {
			return nil, err
		}
	}
	e.ropes = [][]float64{c.rope.invFreq(c.ropeDim, c.ctx)}
	e.mscale = []float64{c.rope.mscale}
	if c.localRope {
		e.ropes = append(e.ropes, c.ropeLocal.invFreq(c.ropeDim, c.ctx))
		e.mscale = append(e.mscale, c.ropeLocal.mscale)
	}
	e.scratch = make([]workerScratch, threads)
	e.at.e = e
	e.qt.e = e
	e.sp.e = e
	for _, m := range w.matrices() {
		e.tokenMACs += m.rows * m.cols
	}
	if err := checkCPUs(opts.CPUs); err != nil {
		return nil, err
	}
	pool, err := newPool(threads, slices.Clone(opts.CPUs))
	if err != nil {
		return nil, err
	}
	e.pool = pool
	if err := e.startKernels(ctx, opts, forced, top, sets); err != nil {
		pool.close()
		return nil, err
	}
	return e, nil
}

// kernelLevel returns the highest kernel level the engine may run: the
// one name forces (forced), or the CPU's highest.
func kernelLevel(name string) (top kernels.Level, forced bool, err error) {
	top = kernels.Detect()
	if name == "" {
		return top, false, nil
	}
	l, err := kernels.ParseLevel(name)
	if err != nil {
		return 0, false, fmt.Errorf("cpu: %w", err)
	}
	if !slices.Contains(kernels.Available(), l) {
		return 0, false, fmt.Errorf("cpu: kernel level %s needs CPU features this machine lacks (it has %s)", l, top)
	}
	return l, true, nil
}

// kernelSets returns the kernel set of each level the engine may run,
// indexed by level (nil for the others): the forced level alone, or every
// level this CPU runs.
func kernelSets(top kernels.Level, forced bool) []*kernels.Set {
	sets := make([]*kernels.Set, top+1)
	for _, l := range kernels.Available() {
		if l <= top && (!forced || l == top) {
			sets[l] = kernels.NewSet(l)
		}
	}
	return sets
}

// startKernels chooses the kernel plan, gives the matrices and the engine
// their kernels, and logs the choice.
func (e *Engine) startKernels(ctx context.Context, opts Options, forced bool, top kernels.Level, sets []*kernels.Set) error {
	kp, err := e.choosePlan(ctx, opts, forced, top, sets)
	if err != nil {
		return err
	}
	if err := e.applyPlan(kp, sets); err != nil {
		return err
	}
	e.info.Kernels = e.KernelChoice()
	e.logPlan()
	return nil
}

// Info reports model facts.
func (e *Engine) Info() engine.Info { return e.info }

// Threads reports the number of kernel threads.
func (e *Engine) Threads() int { return e.pool.n }

// Mapping reports how the weights of a GGUF file are held in memory (how
// much in huge pages); zero for other files.
func (e *Engine) Mapping() gguf.Mapping {
	if e.w.file == nil {
		return gguf.Mapping{}
	}
	return e.w.file.Mapping()
}

// KernelLevel reports the highest kernel level the engine runs (see
// KernelReport for the level of each class).
func (e *Engine) KernelLevel() kernels.Level { return e.set.Level() }

func (e *Engine) seqLen(seq engine.SeqID) int {
	if s, ok := e.seqs[seq]; ok {
		return s.n
	}
	return 0
}

// Truncate keeps the first n tokens of seq and frees the KV blocks past
// them. n at or beyond the sequence length changes nothing.
func (e *Engine) Truncate(seq engine.SeqID, n int) error {
	if n < 0 {
		return fmt.Errorf("cpu: truncate to %d tokens: %w", n, engine.ErrBadInput)
	}
	s, ok := e.seqs[seq]
	if !ok || n >= s.n {
		return nil
	}
	if err := e.truncateShared(s, n); err != nil {
		return err
	}
	s.n = n
	e.shrink(s, blocksFor(n))
	return nil
}

// forget releases everything s holds.
func (e *Engine) forget(s *sequence) {
	e.shrink(s, 0)
	s.n, s.toks, s.nodes = 0, s.toks[:0], s.nodes[:0]
}

func (e *Engine) shrink(s *sequence, keep int) {
	for len(s.blocks) > keep {
		e.kv.release(s.blocks[len(s.blocks)-1])
		s.blocks = s.blocks[:len(s.blocks)-1]
	}
}

// Release frees seq's KV cache.
func (e *Engine) Release(seq engine.SeqID) {
	s, ok := e.seqs[seq]
	if !ok {
		return
	}
	delete(e.seqs, seq)
	e.forget(s)
	e.spare = append(e.spare, s)
}

// KVBlocksInUse reports the KV blocks held by sequences (for tests and metrics).
func (e *Engine) KVBlocksInUse() int { return e.kv.held() }

// Close stops the worker pool and frees the weights (unmapping the file
// the engine opened) and the KV cache.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.enc.close() // waits for a Pool in progress, which reads the weights
	e.pool.close()
	e.seqs = nil
	e.kv.close()
	var err error
	if f := e.w.file; f != nil {
		err = f.Close()
	}
	e.w = nil
	return err
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Step runs one batched forward pass; see engine.Engine.
func (e *Engine) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	if e.closed {
		return fmt.Errorf("cpu: step on a closed engine: %w", engine.ErrBadInput)
	}
	if len(out) < len(in) {
		return fmt.Errorf("cpu: %d outputs for %d inputs: %w", len(out), len(in), engine.ErrBadInput)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cpu: step: %w", err)
	}
	if len(in) == 0 {
		return nil
	}
	if cpus := e.pool.cpus; len(cpus) > 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		restore, err := pinThreadFor(cpus[0])
		if err != nil {
			return err
		}
		defer restore()
	}
	T, O, err := e.admit(in)
	if err != nil {
		return err
	}
	in = e.uncached(in)
	if err := e.forward(ctx, in, T, O); err != nil {
		e.rollback()
		return err
	}
	e.finish(in, out)
	e.remember(in)
	return nil
}

// admit validates the batch, creates new sequences and reserves KV blocks.
// On error nothing has changed.
func (e *Engine) admit(in []engine.Input) (T, O int, err error) {
	e.batch = grow(e.batch, len(in))
	need := 0
	var fail error
	for i := range in {
		ip := &in[i]
		if len(ip.Tokens) == 0 {
			fail = fmt.Errorf("cpu: input %d (seq %d) has no tokens: %w", i, ip.Seq, engine.ErrBadInput)
			e.batch = e.batch[:i]
			break
		}
		for _, t := range ip.Tokens {
			if t < 0 || int(t) >= e.cfg.vocab {
				fail = fmt.Errorf("cpu: input %d (seq %d) has token %d outside [0, %d): %w", i, ip.Seq, t, e.cfg.vocab, engine.ErrBadInput)
				break
			}
		}
		if fail != nil {
			e.batch = e.batch[:i]
			break
		}
		s, ok := e.seqs[ip.Seq]
		if !ok {
			if n := len(e.spare); n > 0 {
				s = e.spare[n-1]
				e.spare = e.spare[:n-1]
			} else {
				s = &sequence{}
			}
			s.created = true
			s.id = ip.Seq
			e.seqs[ip.Seq] = s
		} else if s.inBatch {
			fail = fmt.Errorf("cpu: seq %d appears twice in one step: %w", ip.Seq, engine.ErrBadInput)
			e.batch = e.batch[:i]
			break
		}
		s.inBatch = true
		e.batch[i] = s
		if s.n+len(ip.Tokens) > e.cfg.ctx {
			fail = fmt.Errorf("cpu: seq %d would hold %d tokens (context %d): %w", ip.Seq, s.n+len(ip.Tokens), e.cfg.ctx, engine.ErrContextFull)
			e.batch = e.batch[:i+1]
			break
		}
		need += blocksFor(s.n+len(ip.Tokens)) - len(s.blocks)
		T += len(ip.Tokens)
		if ip.Want&engine.WantAllTokens != 0 {
			O += len(ip.Tokens)
		} else {
			O++
		}
	}
	if fail == nil && need > e.kv.available() {
		fail = fmt.Errorf("cpu: step needs %d KV blocks of %d tokens, %d free: %w", need, blockTokens, e.kv.available(), engine.ErrOutOfMemory)
	}
	if fail != nil {
		for i, s := range e.batch {
			s.inBatch = false
			if s.created {
				s.created = false
				delete(e.seqs, in[i].Seq)
				e.spare = append(e.spare, s)
			}
		}
		return 0, 0, fail
	}
	e.skip = grow(e.skip, len(in))
	for i, s := range e.batch {
		s.oldN, s.oldBlk = s.n, len(s.blocks)
		k := e.attachPrefix(s, &in[i])
		e.skip[i], T = k, T-k
		for len(s.blocks) < blocksFor(s.n+len(in[i].Tokens)-k) {
			s.blocks = append(s.blocks, e.kv.alloc())
		}
	}
	return T, O, nil
}

// uncached returns the inputs as the forward pass sees them: without the
// positions found in the prefix cache (in itself when there are none).
func (e *Engine) uncached(in []engine.Input) []engine.Input {
	if !slices.ContainsFunc(e.skip[:len(in)], func(k int) bool { return k > 0 }) {
		return in
	}
	e.view = append(e.view[:0], in...)
	for i, k := range e.skip[:len(in)] {
		v := &e.view[i]
		v.Tokens = v.Tokens[k:]
		if len(v.Allow) > k {
			v.Allow = v.Allow[k:]
		} else {
			v.Allow = nil
		}
	}
	return e.view
}

// rollback undoes admit after a failed forward pass.
func (e *Engine) rollback() {
	for _, s := range e.batch {
		s.n = s.oldN
		e.shrink(s, s.oldBlk)
		if s.n == 0 {
			s.toks, s.nodes = s.toks[:0], s.nodes[:0]
		}
		s.inBatch = false
		if s.created {
			s.created = false
			delete(e.seqs, s.id)
			e.spare = append(e.spare, s)
		}
	}
}

// Embed writes tok's input embedding (a row of the token-embedding table)
// to dst, which must hold Info().HiddenSize values; an id outside the
// vocabulary (or a closed engine) leaves dst zeroed. It implements
// engine.Embedder.
func (e *Engine) Embed(tok int32, dst []float32) {
	if e.closed || tok < 0 || int(tok) >= e.info.VocabSize || len(dst) < e.info.HiddenSize {
		clear(dst)
		return
	}
	e.embed(tok, dst[:e.info.HiddenSize])
}

var _ engine.Embedder = (*Engine)(nil)

// WeightBytesPerToken reports the bytes of weights one decoded token reads:
// every matrix that multiplies activations (the token embedding is only
// looked up, one row per token).
func (e *Engine) WeightBytesPerToken() int64 {
	var n int64
	if e.closed {
		return 0
	}
	for _, m := range e.w.matrices() {
		n += int64(len(m.data))
	}
	return n
}
