package certs

import (
	"crypto/tls"
	"fmt"
	"os"
)

// tlsKeyPair loads the pair as crypto/tls does, naming the key file when
// the key does not match the certificate.
func tlsKeyPair(certFile, keyFile string, keyPEM []byte) (tls.Certificate, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.X509KeyPair(cb, keyPEM)
	if err != nil {
		return c, fmt.Errorf("%s and %s: %w", keyFile, certFile, err)
	}
	return c, nil
}
