package nats

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"sync"

	gonats "github.com/nats-io/nats.go"
)

// Auth says how a client proves itself to the NATS server and how it
// reaches it: at most one of user and password, token, credentials file
// and nkey seed file, plus TLS files for servers that require TLS. The
// zero value connects without credentials.
type Auth struct {
	// User and Password: user/password authentication (the embedded
	// server's per-run credentials).
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// Token: token authentication.
	Token string `json:"token,omitempty"`
	// CredsFile is a NATS credentials file (user JWT and nkey seed).
	CredsFile string `json:"creds_file,omitempty"`
	// NkeyFile is a file holding a user's nkey seed.
	NkeyFile string `json:"nkey_file,omitempty"`
	// CAFile verifies the server's TLS certificate (TLS on when set);
	// CertFile and KeyFile are the client's certificate for servers that
	// verify clients.
	CAFile   string `json:"ca_file,omitempty"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// options returns the nats.go options a connects with.
func (a Auth) options() ([]gonats.Option, error) {
	n := 0
	for _, set := range []bool{a.User != "" || a.Password != "", a.Token != "", a.CredsFile != "", a.NkeyFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("bus/nats: give one of user and password, token, credentials file, nkey file")
	}
	var opts []gonats.Option
	switch {
	case a.User != "" || a.Password != "":
		opts = append(opts, gonats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, gonats.Token(a.Token))
	case a.CredsFile != "":
		opts = append(opts, gonats.UserCredentials(a.CredsFile))
	case a.NkeyFile != "":
		o, err := gonats.NkeyOptionFromSeed(a.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("bus/nats: nkey file: %w", err)
		}
		opts = append(opts, o)
	}
	if a.CAFile != "" {
		opts = append(opts, gonats.RootCAs(a.CAFile))
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		return nil, errors.New("bus/nats: a client certificate needs both its certificate and key files")
	}
	if a.CertFile != "" {
		opts = append(opts, gonats.ClientCert(a.CertFile, a.KeyFile))
	}
	return opts, nil
}

// KeySize is the size of a key NewKey makes; a message key must have at
// least MinKeySize bytes.
const (
	KeySize    = 32
	MinKeySize = 16
)

// TagSize is the size of the authentication tag a keyed bus appends to
// every message.
const TagSize = 16

// ErrAuth wraps the errors of messages whose authentication tag does not
// verify: they were not sent by a holder of the deployment's key.
var ErrAuth = errors.New("bus/nats: message authentication failed")

// NewKey returns a fresh random message key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return k
}

// NewSecret returns a fresh random secret as text (a password or token).
func NewSecret() string {
	return base64.RawURLEncoding.EncodeToString(NewKey())
}

// sealer appends and checks HMAC-SHA256 tags (truncated to TagSize) over
// a message's subject and payload, so a message cannot be forged or moved
// to another subject without the key. Hashes are pooled: sealing
// allocates nothing in steady state.
type sealer struct {
	pool sync.Pool
}

// macState is one pooled HMAC and its output buffer.
type macState struct {
	h   hash.Hash
	sum []byte
	buf []byte // the subject and its terminator
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) == 0 {
		return nil, nil
	}
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("bus/nats: message key of %d bytes; want at least %d", len(key), MinKeySize)
	}
	k := append([]byte(nil), key...)
	s := &sealer{}
	s.pool.New = func() any { return &macState{h: hmac.New(sha256.New, k), sum: make([]byte, 0, sha256.Size)} }
	return s, nil
}

// tag computes the tag of subject and payload into st.sum.
func (s *sealer) tag(st *macState, subject string, payload []byte) []byte {
	st.h.Reset()
	st.buf = append(append(st.buf[:0], subject...), 0)
	_, _ = st.h.Write(st.buf) // hash writes never fail
	_, _ = st.h.Write(payload)
	st.sum = st.h.Sum(st.sum[:0])
	return st.sum[:TagSize]
}

// seal appends the tag of subject and msg to msg.
func (s *sealer) seal(subject string, msg []byte) []byte {
	st := s.pool.Get().(*macState)
	msg = append(msg, s.tag(st, subject, msg)...)
	s.pool.Put(st)
	return msg
}

// open checks data's tag and returns the payload without it.
func (s *sealer) open(subject string, data []byte) ([]byte, error) {
	if len(data) < TagSize {
		return nil, fmt.Errorf("%w: %d-byte message on %s", ErrAuth, len(data), subject)
	}
	payload, got := data[:len(data)-TagSize], data[len(data)-TagSize:]
	st := s.pool.Get().(*macState)
	ok := hmac.Equal(s.tag(st, subject, payload), got)
	s.pool.Put(st)
	if !ok {
		return nil, fmt.Errorf("%w: on %s", ErrAuth, subject)
	}
	return payload, nil
}
