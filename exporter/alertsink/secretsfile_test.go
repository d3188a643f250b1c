//go:build unix

package alertsink

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// writeSecrets writes content to a file of mode perm in a fresh directory.
func writeSecrets(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kill.secrets")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	require.NoError(t, os.Chmod(p, perm)) // whatever the umask
	return p
}

// killConfig is a config whose kill destination takes its secrets from
// inline (entries of kill.secrets) and file (kill.secrets_file).
func killConfig(file string, inline ...string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Kill.Endpoint = "http://127.0.0.1:8787/kill"
	for _, s := range inline {
		cfg.Kill.Secrets = append(cfg.Kill.Secrets, configopaque.String(s))
	}
	cfg.Kill.SecretsFile = file
	return cfg
}

// TestKillSecretFromAPrivateFile: the kill secret can come from a 0600 file
// in the supervisor's --secrets-file format, alone or with the
// environment's; a file group or others can read, or that is missing,
// empty or a directory, is refused with an error naming
// kill.secrets_file — never the secret.
//
//nolint:funlen // one table of cases, read top to bottom
func TestKillSecretFromAPrivateFile(t *testing.T) {
	key1, err := stdwebhook.ParseSecret(testSecret)
	require.NoError(t, err)
	key2, err := stdwebhook.ParseSecret(testSecret2)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) *Config
		// wantErr is part of the validation error; "" for a valid config.
		wantErr string
		// wantKeys are the signing keys start uses, for a valid config.
		wantKeys [][]byte
	}{
		{
			name:     "a 0600 file alone",
			cfg:      func(t *testing.T) *Config { return killConfig(writeSecrets(t, testSecret+"\n", 0o600)) },
			wantKeys: [][]byte{key1},
		},
		{
			name: "comments and blank lines are skipped, two secrets rotate",
			cfg: func(t *testing.T) *Config {
				return killConfig(writeSecrets(t, "# current\n"+testSecret+"\n\n# next\n"+testSecret2+"\n", 0o400))
			},
			wantKeys: [][]byte{key1, key2},
		},
		{
			name:     "an unset environment variable is no secret: the file's is used",
			cfg:      func(t *testing.T) *Config { return killConfig(writeSecrets(t, testSecret, 0o600), "") },
			wantKeys: [][]byte{key1},
		},
		{
			name:     "the same secret in the file and the environment signs once",
			cfg:      func(t *testing.T) *Config { return killConfig(writeSecrets(t, testSecret, 0o600), testSecret) },
			wantKeys: [][]byte{key1},
		},
		{
			name:     "the environment alone still works",
			cfg:      func(*testing.T) *Config { return killConfig("", testSecret) },
			wantKeys: [][]byte{key1},
		},
		{
			name:    "a file others may read is refused",
			cfg:     func(t *testing.T) *Config { return killConfig(writeSecrets(t, testSecret, 0o644)) },
			wantErr: "mode 0644 lets group or others read it; chmod 0600",
		},
		{
			name:    "a file the group may read is refused",
			cfg:     func(t *testing.T) *Config { return killConfig(writeSecrets(t, testSecret, 0o640)) },
			wantErr: "mode 0640 lets group or others read it; chmod 0600",
		},
		{
			name:    "a missing file is refused",
			cfg:     func(t *testing.T) *Config { return killConfig(filepath.Join(t.TempDir(), "absent")) },
			wantErr: "kill.secrets_file: open ",
		},
		{
			name:    "a directory is refused",
			cfg:     func(t *testing.T) *Config { return killConfig(t.TempDir()) },
			wantErr: "not a regular file",
		},
		{
			name:    "an empty file is refused",
			cfg:     func(t *testing.T) *Config { return killConfig(writeSecrets(t, "# nothing yet\n", 0o600)) },
			wantErr: "holds no secret",
		},
		{
			name:    "neither a file nor a set variable",
			cfg:     func(*testing.T) *Config { return killConfig("", "") },
			wantErr: "kill.secrets: at least one signing secret is required",
		},
		{
			name: "a malformed line names the file and its place",
			cfg: func(t *testing.T) *Config {
				return killConfig(writeSecrets(t, testSecret+"\nwhsec_hunter2\n", 0o600))
			},
			wantErr: "kill.secrets_file ", /* path */
		},
		{
			name: "file and environment together hold at most two",
			cfg: func(t *testing.T) *Config {
				return killConfig(writeSecrets(t, testSecret+"\n"+testSecret2+"\n", 0o600), testSecret)
			},
			wantErr: "kill.secrets: at most 2 secrets",
		},
		{
			name: "the alert receiver's file may not hold a kill secret",
			cfg: func(t *testing.T) *Config {
				cfg := killConfig(writeSecrets(t, testSecret, 0o600))
				cfg.Alerts.Endpoint = "https://alerts.example.com/hook"
				cfg.Alerts.SecretsFile = writeSecrets(t, testSecret, 0o600)
				return cfg
			},
			wantErr: "alerts.secrets_file",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(t)
			err := cfg.Validate()
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), "hunter2", "a secret leaked into a config error")
				assert.NotContains(t, err.Error(), testSecret[6:])
				return
			}
			require.NoError(t, err)
			keys, err := cfg.Kill.signingKeys("kill")
			require.NoError(t, err)
			assert.Equal(t, tc.wantKeys, keys)
		})
	}
}

// fakeFileInfo is a regular file's FileInfo with a given mode and owner.
type fakeFileInfo struct {
	mode fs.FileMode
	uid  uint32
}

func (f fakeFileInfo) Name() string       { return "kill.secrets" }
func (f fakeFileInfo) Size() int64        { return 40 }
func (f fakeFileInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeFileInfo) ModTime() time.Time { return time.Time{} }
func (f fakeFileInfo) IsDir() bool        { return false }
func (f fakeFileInfo) Sys() any           { return &syscall.Stat_t{Uid: f.uid} }

// TestSecretsFileOwner: a 0600 file belongs to the collector's user or
// root; one of any other user is refused, since its owner can chmod it and
// read it.
func TestSecretsFileOwner(t *testing.T) {
	const euid = 1000
	for _, tc := range []struct {
		name    string
		fi      fakeFileInfo
		wantErr string
	}{
		{"the collector's own", fakeFileInfo{mode: 0o600, uid: euid}, ""},
		{"root's", fakeFileInfo{mode: 0o400, uid: 0}, ""},
		{"another user's", fakeFileInfo{mode: 0o600, uid: 4242}, "owned by uid 4242, neither the collector's user (1000) nor root"},
		{"another user's and readable", fakeFileInfo{mode: 0o604, uid: 4242}, "mode 0604"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPrivateFile(tc.fi, euid)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
