package testkit

import (
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the peak resident set size in bytes (VmHWM) of process
// pid, or of this process for pid 0; 0 where /proc does not say.
func PeakRSS(pid int) int64 {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
