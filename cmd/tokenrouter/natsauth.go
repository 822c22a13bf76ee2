package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
)

// Environment variables that carry bus secrets, so they stay off command
// lines.
const (
	envBusKey       = "TOKENROUTER_BUS_KEY"
	envNATSUser     = "TOKENROUTER_NATS_USER"
	envNATSPassword = "TOKENROUTER_NATS_PASSWORD"
	envNATSToken    = "TOKENROUTER_NATS_TOKEN"
)

// natsAuthFlags say how serve --nats and subserver authenticate to an
// external NATS server and where the deployment's message key is.
type natsAuthFlags struct {
	creds, nkey, ca, cert, key, busKeyFile string
}

// natsAuthHelp is the help text's paragraph on the bus's secrets.
const natsAuthHelp = `The bus is authenticated: every message and heartbeat carries a tag keyed by the
deployment's message key, which front end and sub-servers must share: a secret
of at least 16 characters in --bus-key-file or $` + envBusKey + ` (for example
"head -c 32 /dev/urandom | base64"). The NATS server's credentials: --nats-creds
(a credentials file), --nats-nkey (an nkey seed file), or $` + envNATSUser + ` and
$` + envNATSPassword + `, or $` + envNATSToken + `; TLS: --nats-ca, --nats-cert, --nats-key.`

// register adds the flags to fl.
func (a *natsAuthFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&a.creds, "nats-creds", "", "NATS credentials file (user JWT and nkey seed)")
	fl.StringVar(&a.nkey, "nats-nkey", "", "NATS nkey seed file")
	fl.StringVar(&a.ca, "nats-ca", "", "CA certificate file that verifies the NATS server (TLS)")
	fl.StringVar(&a.cert, "nats-cert", "", "client certificate file for NATS servers that verify clients (TLS)")
	fl.StringVar(&a.key, "nats-key", "", "client certificate's private key file (TLS)")
	fl.StringVar(&a.busKeyFile, "bus-key-file", "", "file holding the deployment's message key (default: $"+envBusKey+")")
}

// auth is the NATS authentication the flags and the environment give.
func (a natsAuthFlags) auth(getenv func(string) string) busnats.Auth {
	return busnats.Auth{User: getenv(envNATSUser), Password: getenv(envNATSPassword), Token: getenv(envNATSToken),
		CredsFile: a.creds, NkeyFile: a.nkey, CAFile: a.ca, CertFile: a.cert, KeyFile: a.key}
}

// secrets are the NATS authentication and the message key (required).
func (a natsAuthFlags) secrets(getenv func(string) string) (cluster.Secrets, error) {
	s := cluster.Secrets{Auth: a.auth(getenv)}
	key := getenv(envBusKey)
	if a.busKeyFile != "" {
		b, err := os.ReadFile(a.busKeyFile)
		if err != nil {
			return s, fmt.Errorf("--bus-key-file: %w", err)
		}
		key = string(b)
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return s, errors.New("the bus needs the deployment's message key: --bus-key-file or $" + envBusKey)
	}
	if len(key) < busnats.MinKeySize {
		return s, fmt.Errorf("the deployment's message key has %d characters; want at least %d", len(key), busnats.MinKeySize)
	}
	s.Key = []byte(key)
	return s, nil
}
