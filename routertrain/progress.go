package routertrain

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Printer shows a run's progress on W: on a terminal (Bar) one line
// redrawn in place, a bar of the epoch's steps with the running loss,
// and a line kept per epoch; elsewhere plain lines only, one per epoch
// and a few per data phase.
type Printer struct {
	W   io.Writer
	Bar bool

	last time.Time
}

// barWidth is the number of cells of the bar.
const barWidth = 30

// Phase reports data generation: done of total items of phase.
func (p *Printer) Phase(phase string, done, total int) {
	now := time.Now()
	if done < total && now.Sub(p.last) < p.every() {
		return
	}
	p.last = now
	if p.Bar {
		end := ""
		if done == total {
			end = "\n"
		}
		fmt.Fprintf(p.W, "\r\033[K%s %s %d/%d%s", phase, bar(done, total), done, total, end)
		return
	}
	fmt.Fprintf(p.W, "%s: %d/%d\n", phase, done, total)
}

// every is the shortest time between two redraws.
func (p *Printer) every() time.Duration {
	if p.Bar {
		return 100 * time.Millisecond
	}
	return 5 * time.Second
}

// Train reports a training step or the end of an epoch.
func (p *Printer) Train(q Progress) {
	if q.EpochDone {
		mark := ""
		if q.Best {
			mark = " (best)"
		}
		clearLine := ""
		if p.Bar {
			clearLine = "\r\033[K"
		}
		fmt.Fprintf(p.W, "%sepoch %d/%d  train loss %.4f  held-out loss %.4f%s\n", clearLine, q.Epoch, q.Epochs, q.Loss, q.HeldoutLoss, mark)
		return
	}
	now := time.Now()
	if !p.Bar || now.Sub(p.last) < p.every() {
		return
	}
	p.last = now
	fmt.Fprintf(p.W, "\r\033[Kepoch %d/%d %s %d/%d  loss %.4f", q.Epoch, q.Epochs, bar(q.Batch, q.Batches), q.Batch, q.Batches, q.Loss)
}

// bar draws done of total as a bar of barWidth cells.
func bar(done, total int) string {
	n := barWidth
	if total > 0 {
		n = min(done*barWidth/total, barWidth)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", barWidth-n) + "]"
}
