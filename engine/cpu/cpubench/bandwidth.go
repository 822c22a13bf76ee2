package cpubench

import (
	"runtime"
	"sync"
	"time"
)

// ReadBandwidth measures how fast threads goroutines, each locked to its
// own OS thread, stream-read equal shares of buf, in GB/s (best of
// repeat passes after one warm-up pass).
func ReadBandwidth(buf []byte, threads, repeat int) float64 {
	threads = max(1, threads)
	share := len(buf) / threads &^ 255
	if share == 0 {
		return 0
	}
	best := 0.0
	for pass := range repeat + 1 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for t := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				<-start
				readSum(buf[t*share : (t+1)*share])
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		gbs := float64(share*threads) / time.Since(t0).Seconds() / 1e9
		if pass > 0 {
			best = max(best, gbs)
		}
	}
	return best
}

// fill writes every byte of b (so every page is present).
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i)
	}
}
