package nats_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// pemPair is a certificate and its key, as written to files.
type pemPair struct{ cert, key string }

// issue writes a certificate for name signed by parent (self-signed when
// parent is nil) into dir and returns its files, its certificate and key.
func issue(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (pemPair, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	signer, signKey := parent, parentKey
	if parent == nil {
		signer, signKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pemPair{cert: filepath.Join(dir, name+".pem"), key: filepath.Join(dir, name+"-key.pem")}
	for file, block := range map[string]*pem.Block{p.cert: {Type: "CERTIFICATE", Bytes: der}, p.key: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p, cert, key
}

// TestTLSAuth connects over TLS to a server that requires it and verifies
// client certificates, as on a cluster configured with TLS: without the
// CA, or without a client certificate, the connection is refused.
func TestTLSAuth(t *testing.T) {
	dir := t.TempDir()
	ca, caCert, caKey := issue(t, dir, "ca", nil, nil, &x509.Certificate{SerialNumber: big.NewInt(1),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	srv, _, _ := issue(t, dir, "server", caCert, caKey, &x509.Certificate{SerialNumber: big.NewInt(2),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature})
	cli, _, _ := issue(t, dir, "client", caCert, caKey, &x509.Certificate{SerialNumber: big.NewInt(3),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srv.cert, KeyFile: srv.key, CaFile: ca.cert, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := startPlainServer(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: tc, TLSTimeout: 2})
	for name, a := range map[string]busnats.Auth{
		"no TLS files":          {},
		"no client certificate": {CAFile: ca.cert},
		"client cert, no CA":    {CertFile: cli.cert, KeyFile: cli.key},
	} {
		if b, err := busnats.Connect(ns.ClientURL(), busnats.Options{Auth: a}); err == nil {
			_ = b.Close()
			t.Fatalf("%s: connected", name)
		}
	}
	if _, err := busnats.Connect(ns.ClientURL(), busnats.Options{Auth: busnats.Auth{CAFile: ca.cert, CertFile: cli.cert}}); err == nil {
		t.Fatal("a client certificate without its key was accepted")
	}
	b, err := busnats.Connect(ns.ClientURL(), busnats.Options{Auth: busnats.Auth{CAFile: ca.cert, CertFile: cli.cert, KeyFile: cli.key}})
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
