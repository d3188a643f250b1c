package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKillSecretFromAFile: the configs the README and `make demo` run take
// the kill secret from the supervisor's 0600 secrets file, with no secret in
// the collector's environment; the same file readable by others is refused
// with an error naming kill.secrets_file, and the environment variable
// alone still works (the weaker option).
func TestKillSecretFromAFile(t *testing.T) {
	bin := otelcolBinary(t)
	dir := t.TempDir()
	private := filepath.Join(dir, "private.secrets")
	shared := filepath.Join(dir, "shared.secrets")
	for p, mode := range map[string]os.FileMode{private: 0o600, shared: 0o644} {
		if err := os.WriteFile(p, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	// An empty value unsets testEnv's secret (the last value wins).
	noEnvSecret := "LOOPDETECT_WEBHOOK_SECRET="
	for _, f := range []string{"local.yaml", "demo.yaml", "production.yaml"} {
		for _, tc := range []struct {
			name    string
			env     []string
			wantErr string
		}{
			{"the 0600 file alone", []string{noEnvSecret, "LOOPDETECT_WEBHOOK_SECRETS_FILE=" + private}, ""},
			{"the environment alone", nil, ""},
			{"a file others can read", []string{noEnvSecret, "LOOPDETECT_WEBHOOK_SECRETS_FILE=" + shared}, "kill.secrets_file: " + shared + ": mode 0644 lets group or others read it"},
			{"neither", []string{noEnvSecret}, "kill.secrets: at least one signing secret is required"},
		} {
			t.Run(f+"/"+tc.name, func(t *testing.T) {
				abs, _ := filepath.Abs(f)
				out, err := validate(t, bin, abs, append([]string{"LOOPDETECT_STORAGE_DIR=" + t.TempDir()}, tc.env...))
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("validate: %v\n%s", err, out)
					}
					return
				}
				if err == nil || !strings.Contains(out, tc.wantErr) {
					t.Fatalf("validate: %v, want an error containing %q:\n%s", err, tc.wantErr, out)
				}
				if strings.Contains(out, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") {
					t.Fatalf("the secret is in the error:\n%s", out)
				}
			})
		}
	}
}
