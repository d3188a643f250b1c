package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// maxSecretsFileBytes bounds what is read from a secrets file: a few
// whsec_ lines are under a kilobyte.
const maxSecretsFileBytes = 64 << 10

// signingSecret is one configured secret and where it was found, for
// errors that name the YAML key (never the secret).
type signingSecret struct {
	where string
	value string
}

// signingSecrets gathers a destination's secrets: the `secrets` entries
// that are not empty (an unset ${env:...} expands to ""), then the lines of
// `secrets_file`. key is the destination's YAML key (kill, alerts).
func (d *DestinationConfig) signingSecrets(key string) ([]signingSecret, error) {
	var out []signingSecret
	for i, s := range d.Secrets {
		if v := strings.TrimSpace(string(s)); v != "" {
			out = append(out, signingSecret{where: fmt.Sprintf("%s.secrets[%d]", key, i), value: v})
		}
	}
	if d.SecretsFile == "" {
		return out, nil
	}
	lines, err := readSecretsFile(d.SecretsFile)
	if err != nil {
		return out, fmt.Errorf("%s.secrets_file: %w", key, err)
	}
	for i, l := range lines {
		out = append(out, signingSecret{where: fmt.Sprintf("%s.secrets_file %s, secret %d", key, d.SecretsFile, i+1), value: l})
	}
	return out, nil
}

// signingKeys parses a destination's secrets into HMAC keys, dropping a key
// given twice (the same secret in the file and the environment).
func (d *DestinationConfig) signingKeys(key string) ([][]byte, error) {
	secrets, err := d.signingSecrets(key)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for _, s := range secrets {
		k, err := stdwebhook.ParseSecret(s.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.where, err)
		}
		if !containsKey(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, have := range keys {
		if bytes.Equal(have, k) {
			return true
		}
	}
	return false
}

// readSecretsFile reads one secret a line (blank lines and lines starting
// with # skipped) — the format of loopsupervisor's --secrets-file, so one
// file serves both. Whoever can read the file can sign kills, so it must be
// a regular file that neither group nor others may read, owned by the
// collector's user or root (its owner can chmod and read it whatever its
// mode).
func readSecretsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPrivateFile(fi, os.Geteuid()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxSecretsFileBytes)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s: holds no secret (want one whsec_ secret a line)", path)
	}
	return lines, nil
}

// errNotRegular is returned for a secrets file that is a directory, device
// or pipe.
var errNotRegular = errors.New("not a regular file")

// checkPrivateFile refuses a file others may read or whose owner is
// neither euid nor root.
func checkPrivateFile(fi os.FileInfo, euid int) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s)", errNotRegular, fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %04o lets group or others read it; chmod 0600", perm)
	}
	if uid, ok := fileOwner(fi); ok && uid != 0 && int(uid) != euid {
		return fmt.Errorf("owned by uid %d, neither the collector's user (%d) nor root: its owner can read it whatever its mode; chown it to the collector's user", uid, euid)
	}
	return nil
}
