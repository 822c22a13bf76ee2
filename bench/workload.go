package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Prompt is one prompt of a workload: its text, when it came as text, and
// its token ids, when it was tokenised (or generated).
type Prompt struct {
	// Text is the prompt as text ("" for generated token ids).
	Text string
	// IDs are its token ids (nil when there was no tokenizer).
	IDs []int32
}

// ReadPrompts reads prompts from a file: JSON Lines whose objects carry
// the prompt in "prompt" (or "text"), as eval datasets do, or plain text,
// one prompt per line. Blank lines are skipped. encode, if not nil,
// tokenises each prompt (the models' shared tokenizer); nil leaves IDs
// nil, for servers that tokenise text themselves.
func ReadPrompts(path string, encode func(string) []int32) ([]Prompt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: prompts: %w", err)
	}
	var out []Prompt
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		text := string(line)
		if line[0] == '{' {
			var rec struct {
				Prompt *string `json:"prompt"`
				Text   *string `json:"text"`
			}
			if err := json.Unmarshal(line, &rec); err != nil {
				return nil, fmt.Errorf("bench: prompts: %s:%d: %w", path, n, err)
			}
			switch {
			case rec.Prompt != nil:
				text = *rec.Prompt
			case rec.Text != nil:
				text = *rec.Text
			default:
				return nil, fmt.Errorf("bench: prompts: %s:%d: no \"prompt\" or \"text\" field", path, n)
			}
		}
		p := Prompt{Text: text}
		if encode != nil {
			if p.IDs = encode(text); len(p.IDs) == 0 {
				return nil, fmt.Errorf("bench: prompts: %s:%d: the prompt encodes to no tokens", path, n)
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: prompts: %s holds no prompt", path)
	}
	return out, nil
}

// drawLen draws a length around mean: mean itself for ratio 0, else
// uniform over [mean·(1−ratio), mean·(1+ratio)], at least 1.
func drawLen(rng *rand.Rand, mean int, ratio float64) int {
	if ratio <= 0 {
		return max(mean, 1)
	}
	lo, hi := lengthRange(mean, ratio)
	return lo + rng.IntN(hi-lo+1)
}

// lengthRange is the range drawLen draws from.
func lengthRange(mean int, ratio float64) (lo, hi int) {
	ratio = min(max(ratio, 0), 1)
	lo = max(int(math.Round(float64(mean)*(1-ratio))), 1)
	hi = max(int(math.Round(float64(mean)*(1+ratio))), lo)
	return lo, hi
}

// Longest returns the longest prompt and output o's requests can have.
func (o Options) Longest() (prompt, output int) {
	o.defaults()
	_, output = lengthRange(o.MaxTokens, o.RangeRatio)
	if len(o.Prompts) == 0 {
		_, prompt = lengthRange(o.PromptLen, o.RangeRatio)
		return prompt, output
	}
	for _, p := range o.Prompts {
		prompt = max(prompt, len(p.IDs))
	}
	return prompt, output
}

// request is one request of a workload.
type request struct {
	prompt    Prompt
	maxTokens int
}

// workload draws a client's requests.
type workload struct {
	o     Options
	vocab int
	bos   int32
	rng   *rand.Rand
	ids   []int32 // generated prompt, reused
}

// newWorkload draws client w's requests; models, if known, are the
// system's models (vocabulary and BOS of generated prompts when o gives no
// vocabulary).
func newWorkload(o Options, w int, models []engine.Info) *workload {
	wl := &workload{o: o, vocab: o.Vocab, bos: o.BOS, rng: rand.New(rand.NewPCG(o.Seed, uint64(w)))}
	if wl.vocab == 0 {
		wl.vocab, wl.bos = 512, 1
		if len(models) > 0 {
			wl.vocab, wl.bos = models[0].VocabSize, models[0].BOS
			for _, m := range models {
				wl.vocab = min(wl.vocab, m.VocabSize)
			}
		}
	}
	return wl
}

// next draws the next request. A generated prompt's ids are reused by
// the following draw.
func (wl *workload) next() request {
	o := wl.o
	var r request
	if len(o.Prompts) > 0 {
		r.prompt = o.Prompts[wl.rng.IntN(len(o.Prompts))]
	} else {
		n := drawLen(wl.rng, o.PromptLen, o.RangeRatio)
		wl.ids = wl.ids[:0]
		if wl.bos >= 0 {
			wl.ids = append(wl.ids, wl.bos)
		}
		for len(wl.ids) < n {
			wl.ids = append(wl.ids, int32(3+wl.rng.IntN(max(wl.vocab-3, 1))))
		}
		r.prompt = Prompt{IDs: wl.ids}
	}
	r.maxTokens = drawLen(wl.rng, o.MaxTokens, o.RangeRatio)
	return r
}
