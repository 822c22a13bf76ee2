//go:build linux

// Package smaps reads how a mapping of this process is backed, from
// /proc/self/smaps: the figures the kernel keeps per mapping (VMA), such as
// how much of it is mapped in huge pages.
package smaps

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Field returns the value, in bytes, of the field name ("FilePmdMapped",
// "AnonHugePages", "Rss", ...; the kB fields) of the mapping that holds
// address addr.
func Field(addr uintptr, name string) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("smaps: %w", err)
	}
	defer f.Close()
	return field(f, uint64(addr), name)
}

func field(r io.Reader, addr uint64, name string) (int64, error) {
	prefix := []byte(name + ":")
	s := bufio.NewScanner(r)
	in := false
	for s.Scan() {
		line := s.Bytes()
		if lo, hi, ok := vmaRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if in && bytes.HasPrefix(line, prefix) {
			f := bytes.Fields(line[len(prefix):])
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, fmt.Errorf("smaps: %q", line)
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("smaps: %w", err)
			}
			return kb << 10, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("smaps: %w", err)
	}
	return 0, errors.New("smaps: the mapping or its " + name + " line is missing")
}

// vmaRange parses the address range that begins a mapping's header line
// ("7f56...-7f57... r--s ..."); field lines ("Rss: ...") are not headers.
func vmaRange(line []byte) (lo, hi uint64, ok bool) {
	r, _, _ := bytes.Cut(line, []byte(" "))
	a, b, found := bytes.Cut(r, []byte("-"))
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(string(a), 16, 64)
	hi, err2 := strconv.ParseUint(string(b), 16, 64)
	return lo, hi, err1 == nil && err2 == nil
}
