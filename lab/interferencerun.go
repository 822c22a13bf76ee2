package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
)

// InterferenceRun is `tokenrouter bench interference`: how much the models
// slow each other stepping at once on one thread each (unless their
// Threads say otherwise), unpinned and pinned to a CPU each.
type InterferenceRun struct {
	// Models are the models, small first.
	Models []config.Model
	// Label names the models in the report.
	Label string
	// KVReserveMB is the KV memory the cpu engines warm (bench.Kinds).
	KVReserveMB int
	// Batches are the decode batch sizes measured.
	Batches []int
	// Rounds repeats every case; a row keeps the quickest round's.
	Rounds int
	// Format is table or json.
	Format string
	// Out receives the report, Progress the progress lines.
	Out, Progress io.Writer
}

// InterferenceRow is one line of bench interference.
type InterferenceRow struct {
	// Pinned, Batch and Model name the case: each model's stepping thread
	// pinned to a CPU or not, the decode batch, the model measured.
	Pinned bool   `json:"pinned"`
	Batch  int    `json:"batch"`
	Model  string `json:"model"`
	// Threads is the model's thread count.
	Threads int `json:"threads"`
	// AloneMS and TogetherMS are the quickest round's median decode step
	// alone and with every model stepping at once; Slowdown is
	// TogetherMS/AloneMS − 1.
	AloneMS    float64 `json:"alone_ms"`
	TogetherMS float64 `json:"together_ms"`
	Slowdown   float64 `json:"slowdown"`
	// Rounds is the number of rounds measured.
	Rounds int `json:"rounds"`
}

// RunInterference runs r: every round measures every case
// (MeasureInterference); a row keeps the quickest round's medians (alone
// and together each), as other work on the machine only slows.
func RunInterference(ctx context.Context, r InterferenceRun) error {
	if r.Out == nil {
		r.Out = io.Discard
	}
	if r.Progress == nil {
		r.Progress = io.Discard
	}
	ms := slices.Clone(r.Models)
	for i := range ms {
		if ms[i].Threads == 0 {
			ms[i].Threads = 1
		}
	}
	ks, err := bench.Kinds(ctx, r.KVReserveMB, ms, true)
	if err != nil {
		return err
	}
	pins := []bool{false}
	if _, err := CanPin(len(ms)); err != nil {
		fmt.Fprintf(r.Progress, "pinned: not measured (%v)\n", err)
	} else {
		pins = append(pins, true)
	}
	var rows []InterferenceRow
	for round := range max(r.Rounds, 1) {
		if rows, err = r.round(ctx, ks, ms, pins, round, rows); err != nil {
			return err
		}
		fmt.Fprintf(r.Progress, "round %d/%d done\n", round+1, max(r.Rounds, 1))
	}
	return printInterference(r.Out, r.Format, r.Label, rows)
}

// round measures every case once and folds it into rows (round counts
// from 0; round 0 appends the rows).
func (r InterferenceRun) round(ctx context.Context, ks loader.Kinds, ms []config.Model, pins []bool, round int, rows []InterferenceRow) ([]InterferenceRow, error) {
	k := 0
	for _, pin := range pins {
		for _, b := range r.Batches {
			fr, err := MeasureInterference(ctx, ks, ms, loader.StepTiming{Batch: b, Steps: 24}, pin)
			if err != nil {
				return nil, err
			}
			for i, name := range fr.Models {
				row := InterferenceRow{Pinned: pin, Batch: b, Model: name, Threads: fr.Threads[i],
					AloneMS: millis(fr.Alone[i]), TogetherMS: millis(fr.Together[i]), Rounds: round + 1}
				if round == 0 {
					rows = append(rows, row)
				} else {
					rows[k].AloneMS, rows[k].TogetherMS = min(rows[k].AloneMS, row.AloneMS), min(rows[k].TogetherMS, row.TogetherMS)
					rows[k].Rounds = row.Rounds
				}
				rows[k].Slowdown = rows[k].TogetherMS/rows[k].AloneMS - 1
				k++
			}
		}
	}
	return rows, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// printInterference writes the rows as a table or JSON.
func printInterference(w io.Writer, format, label string, rows []InterferenceRow) error {
	if format == "json" {
		return json.NewEncoder(w).Encode(rows)
	}
	fmt.Fprintf(w, "%s: median decode step alone and with every model stepping at once (partitioned; quickest of %d rounds)\n", label, rows[0].Rounds)
	fmt.Fprintf(w, "%-8s %5s %-12s %7s %10s %10s %9s\n", "pinned", "batch", "model", "threads", "alone", "together", "slowdown")
	for _, r := range rows {
		fmt.Fprintf(w, "%-8v %5d %-12s %7d %8.2fms %8.2fms %+8.1f%%\n", r.Pinned, r.Batch, r.Model, r.Threads, r.AloneMS, r.TogetherMS, 100*r.Slowdown)
	}
	return nil
}
