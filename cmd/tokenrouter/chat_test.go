package main

import (
	"strings"
	"testing"
)

// TestChatRefusesFlags: with --url the flags that describe models are
// refused (the server has its own), and without it so are the listener
// and scale-out flags (chat serves its models in this process, on
// loopback); both before anything reads the terminal.
func TestChatRefusesFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://127.0.0.1:1", "--engine", "sim"}, "--engine describes the models chat starts"},
		{[]string{"--url", "http://127.0.0.1:1", "--model", "a=b.gguf"}, "--model describes the models chat starts"},
		{[]string{"--engine", "sim", "--port", "8080"}, "--port: chat serves its models in this process"},
		{[]string{"--engine", "sim", "--processes"}, "--processes: chat serves its models in this process"},
		{[]string{"--engine", "sim", "--max-tokens", "0"}, "--max-tokens 0: want a positive integer"},
		{[]string{"--engine", "nosuch"}, `--engine "nosuch"`},
	} {
		_, err := runCmd(t, append([]string{"chat"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("chat %s: %v; want an error saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
