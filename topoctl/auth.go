package topoctl

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/topokit/topokit/topo/connect"
)

// security holds the TLS and authentication settings of each backend
// (the flags of addSecurityFlags).
type security struct {
	etcdCA, etcdCert, etcdKey, etcdServerName string
	etcdUser, etcdPassword                    string
	zkAuth, zkAuthFile                        string
	zkCA, zkCert, zkKey, zkServerName         string
	consulToken, consulTokenFile              string
	consulCA, consulCert, consulKey           string
	consulServerName                          string
}

// securitySetting is one flag of security with the environment variables
// it falls back to, in order: topoctl's own, then the store's own CLI
// convention (etcdctl's, consul's) where it is unambiguous.
type securitySetting struct {
	flag  string
	dst   func(*security) *string
	env   []string
	usage string
}

// securitySettings lists the security flags.
func securitySettings() []securitySetting {
	return []securitySetting{
		{"etcd-ca-file", func(s *security) *string { return &s.etcdCA }, []string{"TOPOCTL_ETCD_CA_FILE", "ETCDCTL_CACERT"}, "etcd2: PEM file of the CA that signs the members' certificates (turns TLS on)"},
		{"etcd-cert-file", func(s *security) *string { return &s.etcdCert }, []string{"TOPOCTL_ETCD_CERT_FILE", "ETCDCTL_CERT"}, "etcd2: PEM client certificate (turns TLS on; with --etcd-key-file)"},
		{"etcd-key-file", func(s *security) *string { return &s.etcdKey }, []string{"TOPOCTL_ETCD_KEY_FILE", "ETCDCTL_KEY"}, "etcd2: PEM client key"},
		{"etcd-server-name", func(s *security) *string { return &s.etcdServerName }, []string{"TOPOCTL_ETCD_SERVER_NAME"}, "etcd2: name checked against the members' certificates"},
		{"etcd-user", func(s *security) *string { return &s.etcdUser }, []string{"TOPOCTL_ETCD_USER", "ETCDCTL_USER"}, "etcd2: user name, or NAME:PASSWORD as etcdctl takes it, when etcd auth is enabled"},
		{"etcd-password", func(s *security) *string { return &s.etcdPassword }, []string{"TOPOCTL_ETCD_PASSWORD", "ETCDCTL_PASSWORD"}, "etcd2: password of --etcd-user"},
		{"zk-auth", func(s *security) *string { return &s.zkAuth }, []string{"TOPOCTL_ZK_AUTH"}, `zk2: authentication "scheme:auth" added to the session, e.g. digest:user:password`},
		{"zk-auth-file", func(s *security) *string { return &s.zkAuthFile }, []string{"TOPOCTL_ZK_AUTH_FILE"}, "zk2: file holding the scheme:auth of --zk-auth"},
		{"zk-ca-file", func(s *security) *string { return &s.zkCA }, []string{"TOPOCTL_ZK_CA_FILE"}, "zk2: PEM file of the CA that signs the servers' certificates (turns TLS on: give the servers' secureClientPort)"},
		{"zk-cert-file", func(s *security) *string { return &s.zkCert }, []string{"TOPOCTL_ZK_CERT_FILE"}, "zk2: PEM client certificate (turns TLS on; with --zk-key-file)"},
		{"zk-key-file", func(s *security) *string { return &s.zkKey }, []string{"TOPOCTL_ZK_KEY_FILE"}, "zk2: PEM client key"},
		{"zk-server-name", func(s *security) *string { return &s.zkServerName }, []string{"TOPOCTL_ZK_SERVER_NAME"}, "zk2: name checked against the servers' certificates (default: the host of each address)"},
		{"consul-token", func(s *security) *string { return &s.consulToken }, []string{"TOPOCTL_CONSUL_TOKEN", "CONSUL_HTTP_TOKEN"}, "consul: ACL token sent with every request"},
		{"consul-token-file", func(s *security) *string { return &s.consulTokenFile }, []string{"TOPOCTL_CONSUL_TOKEN_FILE", "CONSUL_HTTP_TOKEN_FILE"}, "consul: file holding the ACL token"},
		{"consul-ca-file", func(s *security) *string { return &s.consulCA }, []string{"TOPOCTL_CONSUL_CA_FILE", "CONSUL_CACERT"}, "consul: CA bundle verifying the agent's certificate (turns https on)"},
		{"consul-cert-file", func(s *security) *string { return &s.consulCert }, []string{"TOPOCTL_CONSUL_CERT_FILE", "CONSUL_CLIENT_CERT"}, "consul: client certificate (turns https on)"},
		{"consul-key-file", func(s *security) *string { return &s.consulKey }, []string{"TOPOCTL_CONSUL_KEY_FILE", "CONSUL_CLIENT_KEY"}, "consul: client key"},
		{"consul-server-name", func(s *security) *string { return &s.consulServerName }, []string{"TOPOCTL_CONSUL_SERVER_NAME", "CONSUL_TLS_SERVER_NAME"}, "consul: name checked against the agent's certificate (default: the host of the address; turns https on)"},
	}
}

// addFlags adds the TLS and authentication flags to fs.
func (sec *security) addFlags(fs *pflag.FlagSet) {
	for _, s := range securitySettings() {
		fs.StringVar(s.dst(sec), s.flag, "", s.usage+" (env "+strings.Join(s.env, ", else ")+")")
	}
}

// resolveSecurity fills the security settings not given as flags from the
// environment, then the config file. A setting given in two forms (a
// Consul token and a token file, a ZooKeeper auth and an auth file, an
// etcd password and a NAME:PASSWORD user) takes the form given at the
// higher precedence -- a flag, then topoctl's variable, then the store's
// own variable, then the config file -- as every other setting does; at
// equal precedence the value wins over the file (as the backends do), and
// a password given both ways is a usage error.
func (o *settings) resolveSecurity(fs *pflag.FlagSet) error {
	// rank says where each setting came from: 0 a flag, 1+i the setting's
	// i-th variable, len(env)+1 the config file; absent, unset.
	rank := map[string]int{}
	for _, s := range securitySettings() {
		if fs.Changed(s.flag) {
			rank[s.flag] = 0
			continue
		}
		set := false
		for i, k := range s.env {
			if v := o.getenv(k); v != "" {
				*s.dst(&o.sec) = v
				rank[s.flag] = 1 + i
				set = true
				break
			}
		}
		if v, ok := o.conf[s.flag]; ok && !set {
			*s.dst(&o.sec) = v
			rank[s.flag] = len(s.env) + 1
		}
	}
	// outranks reports whether setting a was given at a higher precedence
	// than b (b unset included).
	outranks := func(a, b string) bool {
		ra, aok := rank[a]
		rb, bok := rank[b]
		return aok && (!bok || ra < rb)
	}
	if outranks("consul-token-file", "consul-token") {
		o.sec.consulToken = ""
	} else if _, ok := rank["consul-token"]; ok {
		o.sec.consulTokenFile = ""
	}
	if outranks("zk-auth-file", "zk-auth") {
		o.sec.zkAuth = ""
	} else if _, ok := rank["zk-auth"]; ok {
		o.sec.zkAuthFile = ""
	}
	if u, p, ok := strings.Cut(o.sec.etcdUser, ":"); ok {
		ru, rp := rank["etcd-user"], rank["etcd-password"]
		switch {
		case o.sec.etcdPassword == "" || outranks("etcd-user", "etcd-password"):
			o.sec.etcdUser, o.sec.etcdPassword = u, p
		case ru == rp:
			return usagef("--etcd-user %s:... gives a password, and so does --etcd-password (or its variable): give it once", u)
		default: // the password outranks the user's: keep the user name only
			o.sec.etcdUser = u
		}
	}
	return nil
}

// conventionalAddress returns the store's address from its own CLI's
// environment variable (ETCDCTL_ENDPOINTS, CONSUL_HTTP_ADDR), or "".
func (o *settings) conventionalAddress(impl string) string {
	switch impl {
	case "etcd2":
		return o.getenv("ETCDCTL_ENDPOINTS")
	case "consul":
		return o.getenv("CONSUL_HTTP_ADDR")
	}
	return ""
}

// etcdAutoSync is how often topoctl's etcd connections refresh their
// endpoints from the member list.
const etcdAutoSync = 30 * time.Second

// settings are the connect package's settings of the security flags,
// with explain diagnosing failed etcd2 connections.
func (s security) settings(explain func(addr string, err error) error) connect.Settings {
	return connect.Settings{
		Etcd: connect.Etcd{CAFile: s.etcdCA, CertFile: s.etcdCert, KeyFile: s.etcdKey, ServerName: s.etcdServerName,
			User: s.etcdUser, Password: s.etcdPassword,
			// Long-running commands (watch, lock, elect, leader
			// --observe) follow a self-managing cluster's members
			// (serve --cluster) as they come and go.
			AutoSync: etcdAutoSync},
		ZooKeeper: connect.ZooKeeper{Auth: s.zkAuth, AuthFile: s.zkAuthFile,
			CAFile: s.zkCA, CertFile: s.zkCert, KeyFile: s.zkKey, ServerName: s.zkServerName},
		Consul: connect.Consul{Token: s.consulToken, TokenFile: s.consulTokenFile,
			CAFile: s.consulCA, CertFile: s.consulCert, KeyFile: s.consulKey, ServerName: s.consulServerName},
		EtcdDialError: explain,
	}
}

// configurable lists the flags a --config file may set: the connection
// flags, --timeout and the security flags.
func configurable() map[string]bool {
	m := map[string]bool{"topo-implementation": true, "topo-global-server-address": true, "topo-global-root": true, "cell": true, "timeout": true}
	for _, s := range securitySettings() {
		m[s.flag] = true
	}
	return m
}

// maxConfigFile is the largest --config file (in bytes) loadConfig reads:
// one of settings is a few hundred bytes; an endless one (/dev/zero, a
// FIFO) must not take every byte of memory.
const maxConfigFile = 1 << 20

// loadConfig reads --config (or $TOPOCTL_CONFIG): lines "flag-name = value"
// (or "flag-name: value"), blank lines and "#" comments, which start a
// line or follow a space or tab outside double quotes ("/vt#1" is a
// value, "/vt # the root" is /vt). An unknown name or a malformed line is a
// usage error naming the file and line.
func (o *settings) loadConfig(fs *pflag.FlagSet) error {
	if !fs.Changed("config") {
		o.configFile = o.getenv(envConfig)
	}
	if o.configFile == "" {
		return nil
	}
	b, _, err := readBounded(o.configFile, maxConfigFile)
	if err != nil {
		return usageError{fmt.Errorf("--config: %w", err)}
	}
	if len(b) > maxConfigFile {
		return usagef("--config %s: larger than %d bytes: not a settings file", o.configFile, maxConfigFile)
	}
	ok := configurable()
	o.conf = map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, found := strings.Cut(line, "=")
		if !found {
			k, v, found = strings.Cut(line, ":")
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !found || k == "" {
			return usagef("%s:%d: want \"flag-name = value\"", o.configFile, i+1)
		}
		if !ok[k] {
			return usagef("%s:%d: %q cannot be set in a config file (connection, --timeout and TLS/auth flags can)", o.configFile, i+1, k)
		}
		v, err := configValue(v)
		if err != nil {
			return usagef("%s:%d: %v", o.configFile, i+1, err)
		}
		o.conf[k] = v
	}
	return nil
}

// configValue is a config line's value (after its "=" or ":", trimmed)
// without its comment: the text between double quotes when it starts
// with one (a '#' inside is kept), else the text before a '#' that
// follows a space or tab.
func configValue(v string) (string, error) {
	if rest, ok := strings.CutPrefix(v, `"`); ok {
		val, after, closed := strings.Cut(rest, `"`)
		after = strings.TrimSpace(after)
		if !closed || (after != "" && !strings.HasPrefix(after, "#")) {
			return "", errors.New(`want "flag-name = value" with one double-quoted value`)
		}
		return val, nil
	}
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimSpace(v[:i]), nil
		}
	}
	return v, nil
}
